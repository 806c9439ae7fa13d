-- title: A run's system samples, for the System panel
-- description: What the machine did during the run (system_samples, system_gpus) as the
--   Run page's System panel draws it: per chart (`utilisation %`, `memory GiB`, `disk MB/s`)
--   and series (host CPU, the busiest core, each GPU; host memory used, the process's RSS,
--   swap, each GPU's memory; disk write and read), the mean of each of about `points` buckets
--   of x, with its peak and samples. x is the sample's step (the run's last logged step when
--   it was sampled: the loss chart's x), its elapsed_s or its Unix time, as the page's x
--   axis; a sample with no step (before the first line) is not on the step axis. `lo`, `hi`:
--   the zoom's steps. Bounded: at most `points` rows per series, whatever the run's length.
-- param run: run id (example: 'seed-cliff')
-- param x: step, elapsed or time (example: 'step')
-- param lo: first step shown, or NULL for the run's start (example: NULL)
-- param hi: last step shown, or NULL for its end (example: NULL)
-- param points: buckets of x at most (example: 500)
WITH s AS (
    SELECT *, CASE $x WHEN 'step' THEN step::DOUBLE WHEN 'elapsed' THEN elapsed_s
                      ELSE "time" END AS x
    FROM system_samples
    WHERE run = $run AND ($lo IS NULL OR step >= $lo) AND ($hi IS NULL OR step <= $hi)
), g AS (  -- a GPU's values at its sample's x
    SELECT g.gpu, g.util_percent, g.mem_used_bytes, s.x, s.step
    FROM system_gpus AS g
    JOIN s ON g."time" = s."time"
    WHERE g.run = $run
), long AS (
    SELECT 'utilisation %' AS chart, 'CPU, host' AS series, x, step, cpu_percent AS value
    FROM s
    UNION ALL SELECT 'utilisation %', 'CPU, busiest core', x, step, cpu_max_core_percent FROM s
    UNION ALL SELECT 'utilisation %', 'GPU ' || gpu, x, step, util_percent FROM g
    UNION ALL SELECT 'memory GiB', 'host used', x, step, mem_used_bytes / 2 ^ 30 FROM s
    UNION ALL SELECT 'memory GiB', 'process RSS', x, step, proc_rss_bytes / 2 ^ 30 FROM s
    UNION ALL SELECT 'memory GiB', 'swap used', x, step, swap_used_bytes / 2 ^ 30 FROM s
    UNION ALL SELECT 'memory GiB', 'GPU ' || gpu, x, step, mem_used_bytes / 2 ^ 30 FROM g
    UNION ALL SELECT 'disk MB/s', 'write', x, step, disk_write_bps / 1e6 FROM s
    UNION ALL SELECT 'disk MB/s', 'read', x, step, disk_read_bps / 1e6 FROM s
), span AS (
    SELECT min(x) AS x0, greatest(max(x) - min(x), 1e-9) AS width FROM s
)
SELECT chart, series, avg(x) AS x, min(step) AS step, avg(value) AS value,
       max(value) AS peak, count(*) AS n
FROM long, span
WHERE value IS NOT NULL AND x IS NOT NULL
GROUP BY chart, series, least(floor((x - x0) / width * $points), $points - 1)
ORDER BY chart, series, x
