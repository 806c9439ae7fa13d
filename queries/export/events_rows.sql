-- title: Export rows: events
-- description: The events of one run with a row id in (after, upto], in the
--   order they were stored. The run is the archive's partition (run=NAME), not a column of
--   the file.
-- param run: run id (example: 'seed-cliff')
-- param after: highest row id already exported, -1 for none (example: -1)
-- param upto: highest row id to export (example: 1000000000)
-- param rows: most rows to return (a page: app/export/pages.py reads a big run a page
--   at a time, so no query sorts the whole run) (example: 1000000000)
-- param skip: rows of the range passed over before the page (example: 0)
SELECT * EXCLUDE (run)
FROM events
WHERE run = $run AND rowid > $after AND rowid <= $upto
ORDER BY rowid
LIMIT $rows OFFSET $skip
