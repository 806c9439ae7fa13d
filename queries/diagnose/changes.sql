-- title: What was stored since
-- description: What live diagnosis asks first on every tick: the highest metric line id, event
--   rowid and rank line rowid stored after those it has judged, each NULL when nothing new was
--   stored. Row ids are handed out in commit order, and DuckDB skips every stored row group
--   below the given ids, so a tick after which nothing was ingested reads no row, however many
--   runs the database holds.
-- param line: metric line id (metric_rows rowid) already judged, -1 for none (example: -1)
-- param event: event rowid already judged, -1 for none (example: -1)
-- param rank: rank line rowid (ranks_all) already judged, -1 for none (example: -1)
SELECT (SELECT max(rowid) FROM metric_rows WHERE rowid > $line) AS line,
       (SELECT max(rowid) FROM events WHERE rowid > $event) AS event,
       (SELECT max(rowid) FROM ranks_all WHERE rowid > $rank) AS rank
