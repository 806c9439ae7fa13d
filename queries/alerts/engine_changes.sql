-- title: Files with rows stored since
-- description: The files ingest stored metric lines, events, rank lines or eval rows of after
--   the given rowids, with the highest rowid of each (source: line, event, rank or eval): the
--   runs an alert pass must look at. Row ids are handed out in commit order and DuckDB skips
--   every row group below the given ids, so a pass after which nothing was stored reads no row,
--   however many runs the database holds.
-- param line: metric_rows rowid already seen (example: -1)
-- param event: events rowid already seen (example: -1)
-- param rank: ranks_all rowid already seen (example: -1)
-- param eval: eval_rows rowid already seen (example: -1)
SELECT 'line' AS source, file_id, max(rowid) AS top FROM metric_rows
WHERE rowid > $line GROUP BY file_id
UNION ALL
SELECT 'event', file_id, max(rowid) FROM events WHERE rowid > $event GROUP BY file_id
UNION ALL
SELECT 'rank', file_id, max(rowid) FROM ranks_all WHERE rowid > $rank GROUP BY file_id
UNION ALL
SELECT 'eval', file_id, max(rowid) FROM eval_rows WHERE rowid > $eval GROUP BY file_id
