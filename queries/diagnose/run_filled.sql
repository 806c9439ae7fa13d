-- title: How many lines of a run fill each column
-- description: One row: for every column of metrics_all, how many of the run's lines hold a
--   value there (`run`: every line). `diagnose` says from it what it could not judge: no
--   time or elapsed_s (stalls), no loss-like metric (spikes, divergences), no accuracy-like
--   one (cliffs); the settings' loss_metrics and accuracy_metrics globs say which are which.
-- param run: run id (example: 'seed-cliff')
SELECT count(COLUMNS(*))
FROM metrics_all
WHERE run = $run
