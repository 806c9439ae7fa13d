-- title: Incidents
-- description: What live detection found so far, one row per incident, most recent first.
--   Kinds: stall, spike, cliff, nonfinite; causes most likely first, one evidence sentence
--   each.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
SELECT run, kind, metric, step, end_step, value, baseline, causes, evidence, detected_at,
       updated_at
FROM incidents
WHERE $run IS NULL OR run = $run
ORDER BY run, step
