-- title: Spikes
-- description: Lines where a loss-like metric jumps to at least `ratio` times the median of
--   its previous 20 lines, most of it in one line (a warm-up ramp is not a spike). The live
--   detector (app/diagnose) adds a noise-scale test and episode ends.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'loss')
-- param ratio: value / baseline (default: 2.0) (example: 2.0)
WITH m AS (
    SELECT rowid AS line_id, step, COLUMNS($metric) AS value
    FROM metrics_all
    WHERE run = $run
), b AS (
    SELECT *,
        median(value) FILTER (WHERE isfinite(value)) OVER (
            ORDER BY line_id ROWS BETWEEN 20 PRECEDING AND 1 PRECEDING) AS baseline,
        lag(value) OVER (ORDER BY line_id) AS previous
    FROM m
)
SELECT step, value, baseline, value / baseline AS ratio
FROM b
WHERE value >= coalesce($ratio, 2.0) * baseline
  AND value - previous > 0.5 * (value - baseline)
ORDER BY line_id
