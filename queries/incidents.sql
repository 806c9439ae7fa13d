-- title: Incidents
-- description: What live detection found so far, one row per incident, most recent first.
--   Kinds: stall, spike, cliff, nonfinite; causes most likely first, one evidence sentence
--   each. `step` is the episode's first line, `value` its worst value (the top of a spike,
--   the bottom of a cliff) and `worst_step` the step where that value was logged.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
SELECT run, kind, metric, step, end_step, worst_step, value, baseline, causes, evidence,
       detected_at, updated_at
FROM incidents
WHERE $run IS NULL OR run = $run
ORDER BY run, step
