-- title: Spikes
-- description: Lines where a loss-like metric jumps far above the median of its previous 20
--   lines: at least `ratio` times it and 8 noise scales above it (the noise scale is the
--   median line-to-line change), most of it in one line, so a warm-up ramp is not a spike.
--   The same rules as the live detector (app/diagnose/detect.py), which also follows how long
--   each spike lasts.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'loss')
-- param ratio: value / baseline (default: 2.0) (example: 2.0)
WITH m AS (
    SELECT line_id, step, COLUMNS(lambda c: c = $metric) AS value
    FROM metrics_all
    WHERE run = $run
), d AS (
    SELECT *, CASE WHEN isfinite(value) THEN value END AS v,
           value - lag(value) OVER (ORDER BY line_id) AS change
    FROM m
), b AS (
    SELECT *,
        median(v) OVER w AS baseline,
        greatest(median(abs(change)) OVER w * 1.4826 / sqrt(2),
                 0.01 * abs(median(v) OVER w)) AS noise
    FROM d
    WINDOW w AS (ORDER BY line_id ROWS BETWEEN 20 PRECEDING AND 1 PRECEDING)
), hits AS (
    SELECT *, value - baseline AS excess,
           greatest(8 * noise, (coalesce($ratio, 2.0) - 1) * abs(baseline)) AS threshold
    FROM b
)
SELECT step, value, baseline, value / baseline AS ratio
FROM hits
WHERE excess > threshold AND change > 0.5 * excess
ORDER BY line_id
