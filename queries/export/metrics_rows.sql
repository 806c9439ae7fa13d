-- title: Export rows: metrics
-- description: The training lines (metrics_all, every attempt) of one run with line_id in
--   (after, upto], in the order they were logged. The run is the archive's partition
--   (run=NAME), not a column of the file.
-- param run: run id (example: 'seed-cliff')
-- param after: highest line_id already exported, -1 for none (example: -1)
-- param upto: highest line_id to export (example: 1000000000)
-- param rows: most rows to return (a page: app/export/pages.py reads a big run a page
--   at a time, so no query sorts the whole run) (example: 1000000000)
-- param skip: rows of the range passed over before the page (example: 0)
SELECT * EXCLUDE (run)
FROM metrics_all
WHERE run = $run AND line_id > $after AND line_id <= $upto
ORDER BY line_id
LIMIT $rows OFFSET $skip
