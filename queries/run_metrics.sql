-- title: Run metrics
-- description: Every metric of one run's current timeline, in step order (for charts).
-- param run: run id (example: 'seed-cliff')
SELECT *
FROM metrics
WHERE run = $run
ORDER BY step
