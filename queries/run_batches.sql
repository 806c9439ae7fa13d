-- title: Run batches
-- description: Per logged line of one run: its attempt, epoch and the length bucket of each
--   micro-batch consumed since the previous line; what cause attribution reads.
-- param run: run id (example: 'seed-cliff')
SELECT line_id, step, attempt, epoch, buckets
FROM metrics_all
WHERE run = $run
ORDER BY line_id
