-- title: Run events
-- description: One run's events (checkpoints, epochs, resumes, ...) in the order written.
-- param run: run id (example: 'seed-cliff')
SELECT kind, step, elapsed_s, "time", data
FROM events
WHERE run = $run
ORDER BY file_id, "offset"
