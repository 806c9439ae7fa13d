-- title: Stalls
-- description: Intervals between logged lines far above the run's typical interval (a
--   blocking checkpoint, a hung data loader, a straggler): at least min_ratio times the median
--   interval and min_excess_s seconds longer.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
-- param min_ratio: interval / typical interval (default: 3.0) (example: 3.0)
-- param min_excess_s: seconds above the typical interval (default: 1.0) (example: 1.0)
WITH gaps AS (
    SELECT *, median(gap_s) OVER (PARTITION BY run) AS typical_s
    FROM line_gaps
    WHERE ($run IS NULL OR run = $run) AND gap_s IS NOT NULL
)
SELECT run, attempt, prev_step, step, steps, gap_s, typical_s, gap_s / typical_s AS ratio
FROM gaps
WHERE gap_s >= coalesce($min_ratio, 3.0) * typical_s
  AND gap_s - typical_s >= coalesce($min_excess_s, 1.0)
ORDER BY run, line_id
