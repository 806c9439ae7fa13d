-- title: Export rows: incidents
-- description: Every incident of one run as it stands now; the run itself is the archive's
--   partition, not a column of the file.
-- param run: run id (example: 'seed-cliff')
SELECT * EXCLUDE (run)
FROM incidents
WHERE run = $run
ORDER BY step, kind, metric
