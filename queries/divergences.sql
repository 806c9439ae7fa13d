-- title: Divergences
-- description: Lines where a loss-like metric has climbed to `ratio` times its best (lowest)
--   value before it, a positive one, and to `above` times the highest value before that best
--   (a loss climbing back above where it started, not a memorised run's noise at 0.0005-0.05),
--   and each of the next `stays` lines that logs it stays there (a non-finite value counts: a
--   diverged loss ends in NaN; one of them at least is logged). No history is needed: a
--   warm-up divergence logged every 200 steps is listed from its first lines, before the
--   spike rule's 15 lines. The defaults are the live detector's rules (app/diagnose/detect.py,
--   SQL_PARAMS); the detector reports the first line of each divergence and follows how long
--   it lasts, and skips one that starts inside a spike it found; this query lists every line
--   the rule holds for.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'loss')
-- param ratio: times the best value before the line (default: 4.0) (example: 4.0)
-- param above: times the highest value before that best (default: 2.0) (example: 2.0)
-- param stays: lines after it that must stay there (default: 3) (example: 3)
WITH m AS (
    SELECT line_id, step, COLUMNS(lambda c: c = $metric) AS value
    FROM metrics_all
    WHERE run = $run
), v AS (
    SELECT *, CASE WHEN isfinite(value) THEN value END AS v,
           coalesce(NOT isfinite(value), false) AS bad
    FROM m
), p AS (
    SELECT *,
        min(v) OVER before AS best,
        -- the first line holding that best, and the highest value before each line
        arg_min(line_id, CASE WHEN v IS NOT NULL THEN struct_pack(v := v, line_id := line_id)
                         END) OVER before AS best_line,
        max(v) OVER before AS top,
        min(v) OVER ahead AS next_min,
        count(*) OVER ahead AS next_n,
        count(v) OVER ahead + count(*) FILTER (WHERE bad) OVER ahead AS next_logged
    FROM v
    WINDOW before AS (ORDER BY line_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           ahead AS (ORDER BY line_id ROWS BETWEEN 1 FOLLOWING AND coalesce($stays, 3) FOLLOWING)
), levels AS (
    SELECT p.*, greatest(coalesce($ratio, 4.0) * p.best,
                         coalesce($above, 2.0) * coalesce(b.top, 0)) AS level
    FROM p LEFT JOIN p AS b ON b.line_id = p.best_line
)
SELECT step, value, best, level, value / best AS times_best
FROM levels
WHERE best > 0 AND v >= level AND next_n = coalesce($stays, 3) AND next_logged > 0
  AND (next_min IS NULL OR next_min >= level)
ORDER BY line_id
