-- title: Prometheus: each GPU of the newest system sample of each run exported
-- description: For GET /metrics: the rows of system_gpus of each named run's newest sample
--   (by the sampler's `time`, as metrics/system_samples), one per GPU. Only samples taken
--   since `since` are looked at (DuckDB skips older row groups by their time range).
-- param runs: run ids (example: ['seed-cliff'])
-- param since: Unix seconds: older samples are not looked at (example: 1600000000.0)
WITH newest AS (
    SELECT run, max("time") AS "time"
    FROM system_gpus
    WHERE "time" >= $since AND list_contains($runs, run)
    GROUP BY run
)
SELECT g.*
FROM system_gpus AS g
JOIN newest USING (run, "time")
WHERE g."time" >= $since
ORDER BY g.run, g.gpu
