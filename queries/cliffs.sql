-- title: Cliffs
-- description: Lines where an accuracy-like metric falls at least `drop` (a fraction) below
--   the median of its previous 20 lines and stays below half that drop for the next 3 lines.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'accuracy')
-- param drop: fraction below the baseline (default: 0.3) (example: 0.3)
WITH m AS (
    SELECT rowid AS line_id, step, COLUMNS($metric) AS value
    FROM metrics_all
    WHERE run = $run
), b AS (
    SELECT *,
        median(value) FILTER (WHERE isfinite(value)) OVER (
            ORDER BY line_id ROWS BETWEEN 20 PRECEDING AND 1 PRECEDING) AS baseline,
        max(value) OVER (ORDER BY line_id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS next_max,
        count(value) OVER (ORDER BY line_id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS next_n
    FROM m
), hits AS (
    SELECT *, 1 - value / baseline AS fell
    FROM b
    WHERE value <= (1 - coalesce($drop, 0.3)) * baseline
      AND next_n = 3 AND next_max < (1 - coalesce($drop, 0.3) / 2) * baseline
)
-- the first line of each cliff, not every line that stays down
SELECT step, value, baseline, fell
FROM hits
QUALIFY lag(line_id) OVER (ORDER BY line_id) IS DISTINCT FROM line_id - 1
ORDER BY line_id
