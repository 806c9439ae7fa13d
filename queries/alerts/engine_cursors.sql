-- title: Where the stored rows end
-- description: The highest rowid of each table ingest appends to (metric lines, events, rank
--   lines, eval rows), -1 for an empty one: taken on a full pass of the alert rules, after
--   which a pass asks only what was stored beyond them (alerts/engine_changes).
SELECT coalesce((SELECT max(rowid) FROM metric_rows), -1) AS line,
       coalesce((SELECT max(rowid) FROM events), -1) AS event,
       coalesce((SELECT max(rowid) FROM ranks_all), -1) AS rank,
       coalesce((SELECT max(rowid) FROM eval_rows), -1) AS eval
