-- title: Stalls
-- description: Intervals between logged lines far above the run's typical interval (a
--   blocking checkpoint, a hung data loader, a straggler): at least min_ratio times the typical
--   interval and min_excess_s seconds longer. The typical interval is the `quantile` of the
--   `window` intervals before (of the same attempt), not their median: a run with two speeds
--   (a gap of ~4 s or ~20 s) has a median of the fast ones, and every slow gap is its rhythm.
--   Nothing is judged before `min_lines` intervals are there. The defaults are the live
--   detector's rules (app/diagnose/detect.py, SQL_PARAMS). What differs: the detector judges
--   a gap listed here that held an evaluation pass (an evaluation row at a step from the line
--   before's to below its own) again, against the run's earlier such pauses, so a routine
--   evaluation every N steps listed here is no incident of `python -m app diagnose`.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
-- param min_ratio: interval / typical interval (default: 3.0) (example: 3.0)
-- param min_excess_s: seconds above the typical interval (default: 1.0) (example: 1.0)
-- param quantile: the quantile of the intervals before that is the typical one (default: 0.85) (example: 0.85)
-- param window: intervals before each one that give its typical interval (default: 20) (example: 20)
-- param min_lines: intervals needed before one is judged (default: 5) (example: 5)
WITH gaps AS (
    SELECT *,
           quantile_cont(gap_s, coalesce($quantile, 0.85)) OVER w AS typical_s,
           count(gap_s) OVER w AS judged_on
    FROM line_gaps
    WHERE ($run IS NULL OR run = $run)
    WINDOW w AS (PARTITION BY run, attempt ORDER BY line_id
                 ROWS BETWEEN coalesce($window, 20) PRECEDING AND 1 PRECEDING)
)
SELECT run, attempt, prev_step, step, steps, gap_s, typical_s, gap_s / typical_s AS ratio
FROM gaps
WHERE gap_s IS NOT NULL AND judged_on >= coalesce($min_lines, 5)
  AND gap_s >= coalesce($min_ratio, 3.0) * typical_s
  AND gap_s - typical_s >= coalesce($min_excess_s, 1.0)
ORDER BY run, line_id
