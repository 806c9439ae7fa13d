-- title: Line gaps
-- description: Seconds and steps between consecutive logged lines of the same attempt, in the
--   order they were logged; the base of time_gaps, stalls and checkpoints.

CREATE VIEW line_gaps AS
SELECT
    run,
    attempt,
    line_id,
    step,
    lag(step) OVER w AS prev_step,
    coalesce(elapsed_s, "time") AS t,
    coalesce(elapsed_s, "time") - lag(coalesce(elapsed_s, "time")) OVER w AS gap_s,
    step - lag(step) OVER w AS steps
FROM metrics_all
WINDOW w AS (PARTITION BY run, attempt ORDER BY line_id);
