-- title: Whether a run has system samples
-- description: 1 when the run has a system sample (table system_samples, from system.jsonl),
--   else 0: the one question a run without system.jsonl costs diagnosis
--   (app/diagnose/system.py).
-- param run: run id (example: 'seed-cliff')
SELECT count(*) AS sampled
FROM (SELECT 1 FROM system_samples WHERE run = $run LIMIT 1)
