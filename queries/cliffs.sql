-- title: Cliffs
-- description: Lines where an accuracy-like metric falls far below the median of its previous
--   `window` lines -- at least `drop` (a fraction) and `sigmas` noise scales below it (the
--   noise scale is the larger of the median line-to-line change and the interquartile range
--   over the same lines, each as a standard deviation, and at least `floor` times the
--   median) -- and stays below half that drop for the next `stays` lines. Nothing is
--   judged before `min_lines` values are there. The defaults are the live detector's rules
--   (app/diagnose/detect.py, SQL_PARAMS); the first line of each cliff is listed.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'accuracy')
-- param drop: fraction below the baseline (default: 0.3) (example: 0.3)
-- param sigmas: noise scales below the baseline (default: 8.0) (example: 8.0)
-- param window: lines in the rolling baseline (default: 20) (example: 20)
-- param min_lines: values needed in the window before a line is judged (default: 15) (example: 15)
-- param floor: least noise scale, a fraction of the baseline (default: 0.01) (example: 0.01)
-- param stays: lines the metric must stay down after the first (default: 3) (example: 3)
WITH m AS (
    SELECT line_id, step, COLUMNS(lambda c: c = $metric) AS value
    FROM metrics_all
    WHERE run = $run
), d AS (
    SELECT *, v - lag(v) OVER (ORDER BY line_id) AS change
    FROM (SELECT *, CASE WHEN isfinite(value) THEN value END AS v FROM m)
), b AS (
    SELECT *,
        CASE WHEN count(v) OVER w >= coalesce($min_lines, 15) THEN median(v) OVER w END
            AS baseline,
        CASE WHEN count(change) OVER w >= coalesce($min_lines, 15)
             THEN median(abs(change)) OVER w END AS jump,
        (quantile_cont(v, 0.75) OVER w - quantile_cont(v, 0.25) OVER w) / 1.349 AS spread,
        max(v) OVER ahead AS next_max,
        count(v) OVER ahead AS next_n
    FROM d
    WINDOW w AS (ORDER BY line_id
                 ROWS BETWEEN coalesce($window, 20) PRECEDING AND 1 PRECEDING),
           ahead AS (ORDER BY line_id
                     ROWS BETWEEN 1 FOLLOWING AND coalesce($stays, 3) FOLLOWING)
), hits AS (
    SELECT *,
        greatest(coalesce($sigmas, 8.0)
                     * greatest(jump * (1.4826 / sqrt(2)), spread,
                                 coalesce($floor, 0.01) * abs(baseline)),
                 coalesce($drop, 0.3) * abs(baseline)) AS threshold
    FROM b
)
SELECT step, value, baseline, 1 - value / baseline AS fell
FROM hits
WHERE baseline - v > threshold AND jump IS NOT NULL AND next_n = coalesce($stays, 3)
  AND next_max < baseline - threshold / 2
-- the first line of each cliff, not every line that stays down
QUALIFY lag(line_id) OVER (ORDER BY line_id) IS DISTINCT FROM line_id - 1
ORDER BY line_id
