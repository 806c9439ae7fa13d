-- title: Downsample
-- description: One metric of one run reduced to about `points` points for a chart, keeping
--   spikes: the lowest and highest value of each step bucket at the steps they happened, plus
--   every value beyond the 0.01th/99.99th percentile and every NaN/inf, so no extreme value
--   disappears from a chart.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'loss')
-- param points: about how many points to return (default: 2000) (example: 2000)
WITH m AS (
    SELECT step, COLUMNS($metric) AS value
    FROM metrics
    WHERE run = $run
), finite AS (
    SELECT * FROM m WHERE isfinite(value)
), span AS (
    SELECT min(step) AS lo, max(step) AS hi,
           quantile_cont(value, 0.0001) AS q_lo, quantile_cont(value, 0.9999) AS q_hi
    FROM finite
), buckets AS (
    SELECT floor((f.step - s.lo) * (coalesce($points, 2000) // 2) / (s.hi - s.lo + 1)) AS b,
           arg_min(f.step, f.value) AS low_step, min(f.value) AS low,
           arg_max(f.step, f.value) AS high_step, max(f.value) AS high
    FROM finite AS f, span AS s
    GROUP BY b
)
SELECT step, value FROM (
    SELECT low_step AS step, low AS value FROM buckets
    UNION
    SELECT high_step, high FROM buckets
    UNION
    SELECT m.step, m.value FROM m, span AS s
    WHERE NOT isfinite(m.value) OR m.value > s.q_hi OR m.value < s.q_lo
)
ORDER BY step
