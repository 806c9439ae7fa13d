-- title: Export: a run's rows per span of row ids
-- description: How many rows of one run have a row id in each span of $span ids within
--   (after, upto]: an export plans its pages of a big run from these counts, so that each
--   page's query sorts only its own rows (app/export/pages.py).
-- identifier table: table or view (example: metrics_all)
-- identifier id: its row id column, line_id or rowid (example: line_id)
-- param run: run id (example: 'seed-cliff')
-- param after: highest row id already exported, -1 for none (example: -1)
-- param upto: highest row id to export (example: 1000000000)
-- param span: row ids per bucket (example: 32768)
SELECT {id} // $span AS bucket, count(*) AS rows
FROM {table}
WHERE run = $run AND {id} > $after AND {id} <= $upto
GROUP BY bucket
ORDER BY bucket
