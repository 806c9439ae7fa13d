-- title: Runs table older value
-- description: The newest non-NULL value of one column among a metrics file's lines below
--   rowid `before`: a run's loss or accuracy when its newest lines (read/runs_tail) carry
--   none. Row groups where the column is all NULL are skipped by their statistics.
-- param file: file id (example: 2)
-- param before: only rowids below this (example: 100000)
-- identifier column: metric column (example: loss)
SELECT arg_max({column}, rowid) AS value, max(rowid) AS line
FROM metric_rows
WHERE file_id = $file AND rowid < $before AND {column} IS NOT NULL
