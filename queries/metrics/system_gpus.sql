-- title: Prometheus: each GPU of the newest system sample of each run exported
-- description: For GET /metrics: every row of system_gpus at each named run's newest `time`
--   (the sampler's clock, as metrics/system_samples), one per GPU. Only samples taken since
--   `since` are looked at (DuckDB skips older row groups by their time range).
-- param runs: run ids (example: ['seed-cliff'])
-- param since: Unix seconds: older samples are not looked at (example: 1600000000.0)
SELECT *
FROM system_gpus
WHERE "time" >= $since AND list_contains($runs, run)
QUALIFY "time" = max("time") OVER (PARTITION BY run)
ORDER BY run, gpu
