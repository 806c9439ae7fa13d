-- title: Export rows: runs
-- description: One run's row of `runs` (status, run.json as `meta`, first and last seen);
--   the run itself is the archive's partition, not a column of the file.
-- param run: run id (example: 'seed-cliff')
SELECT * EXCLUDE (run)
FROM runs
WHERE run = $run
