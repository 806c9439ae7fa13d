-- title: Run exists
-- description: Whether a run of this exact name is known (a page checks the run its URL
--   names without listing every run).
-- param run: run id (example: 'seed-cliff')
SELECT count(*) > 0 AS found
FROM runs
WHERE run = $run
