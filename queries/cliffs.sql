-- title: Cliffs
-- description: Lines where an accuracy-like metric falls far below the median of its previous
--   20 lines -- at least `drop` (a fraction) and 8 noise scales below it -- and stays below
--   half that drop for the next 3 lines. The same rules as the live detector
--   (app/diagnose/detect.py); the first line of each cliff is listed.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'accuracy')
-- param drop: fraction below the baseline (default: 0.3) (example: 0.3)
WITH m AS (
    SELECT line_id, step, COLUMNS(lambda c: c = $metric) AS value
    FROM metrics_all
    WHERE run = $run
), d AS (
    SELECT *, CASE WHEN isfinite(value) THEN value END AS v,
           abs(value - lag(value) OVER (ORDER BY line_id)) AS change
    FROM m
), b AS (
    SELECT *,
        median(v) OVER w AS baseline,
        greatest(median(change) OVER w * 1.4826 / sqrt(2),
                 0.01 * abs(median(v) OVER w)) AS noise,
        max(value) OVER (ORDER BY line_id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS next_max,
        count(value) OVER (ORDER BY line_id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS next_n
    FROM d
    WINDOW w AS (ORDER BY line_id ROWS BETWEEN 20 PRECEDING AND 1 PRECEDING)
), hits AS (
    SELECT *, greatest(8 * noise, coalesce($drop, 0.3) * abs(baseline)) AS threshold
    FROM b
)
SELECT step, value, baseline, 1 - value / baseline AS fell
FROM hits
WHERE baseline - value > threshold AND next_n = 3 AND next_max < baseline - threshold / 2
-- the first line of each cliff, not every line that stays down
QUALIFY lag(line_id) OVER (ORDER BY line_id) IS DISTINCT FROM line_id - 1
ORDER BY line_id
