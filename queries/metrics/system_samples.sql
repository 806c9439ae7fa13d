-- title: Prometheus: the newest system sample of each run exported
-- description: For GET /metrics: the newest row of system_samples (by the sampler's `time`)
--   of each run named, one row a run. Only samples taken since `since` are looked at: rows
--   are appended in time order, so DuckDB skips the older row groups by their time range and
--   a scrape costs the samples of that window, not the table.
-- param runs: run ids (example: ['seed-cliff'])
-- param since: Unix seconds: older samples are not looked at (example: 1600000000.0)
SELECT *
FROM system_samples
WHERE "time" >= $since AND list_contains($runs, run)
QUALIFY row_number() OVER (PARTITION BY run ORDER BY "time" DESC) = 1
ORDER BY run
