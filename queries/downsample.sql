-- title: Downsample
-- description: One metric of one run reduced to about `points` points for a chart, keeping
--   spikes: the lowest and highest value of each step bucket at the steps they happened, plus
--   every value beyond the 0.01th/99.99th percentile and every NaN/inf, so no extreme value
--   disappears from a chart.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name, matched exactly (example: 'loss')
-- param points: about how many points to return (default: 2000) (example: 2000)
WITH m AS MATERIALIZED (
    SELECT step, COLUMNS(lambda c: c = $metric) AS value
    FROM metrics
    WHERE run = $run
), span AS (
    SELECT min(step) AS lo, max(step) AS hi,
           quantile_cont(value, [0.0001, 0.9999]) FILTER (WHERE isfinite(value)) AS q
    FROM m
), buckets AS (
    SELECT floor((m.step - s.lo) * (coalesce($points, 2000) // 2) / (s.hi - s.lo + 1)) AS b,
           arg_min(m.step, m.value) AS low_step, min(m.value) AS low,
           arg_max(m.step, m.value) AS high_step, max(m.value) AS high
    FROM m, span AS s
    WHERE isfinite(m.value)
    GROUP BY b
)
SELECT step, value FROM (
    SELECT low_step AS step, low AS value FROM buckets
    UNION
    SELECT high_step, high FROM buckets
    UNION
    SELECT m.step, m.value FROM m, span AS s
    WHERE NOT isfinite(m.value) OR m.value > s.q[2] OR m.value < s.q[1]
)
ORDER BY step
