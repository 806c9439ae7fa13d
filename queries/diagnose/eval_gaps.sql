-- title: A run's evaluation gaps
-- description: For each of one run's last `last` evaluation rows (table evals, kind 'eval')
--   logged at a step below `before`: the seconds between the metric lines around it (the
--   last line at or below its step and the next one, in the same attempt), by the gap rule's
--   clock (line_clock). Whether the run's evaluations pause its training: an evaluation row
--   inside a stall's gap is named its cause only if the ones before it paused too
--   (app/diagnose/causes.py).
-- param run: run id (example: 'hf-mistral-translator')
-- param before: the steps read are below this one (example: 1000000)
-- param last: how many of the newest evaluations (example: 5)
WITH evaluated AS (
    SELECT DISTINCT step FROM evals
    WHERE run = $run AND kind = 'eval' AND step < $before
    ORDER BY step DESC
    LIMIT $last
), lines AS (
    SELECT step, attempt, line_clock(elapsed_s, "time") AS t
    FROM metrics_all
    WHERE run = $run AND step <= $before
)
SELECT e.step, after.t - upto.t AS gap_s
FROM evaluated AS e
ASOF JOIN lines AS upto ON e.step >= upto.step
ASOF JOIN lines AS after ON e.step < after.step
WHERE after.attempt = upto.attempt
ORDER BY e.step
