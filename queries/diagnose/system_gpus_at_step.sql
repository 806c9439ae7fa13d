-- title: GPU samples at one step
-- description: One run's per-GPU samples (table system_gpus) taken while `step` was the last
--   step the run had logged, oldest first: the GPUs' memory before a crash at that step
--   (app/diagnose/system.py, before_crash).
-- param run: run id (example: 'seed-cliff')
-- param step: the last step logged (example: 2000)
SELECT "time", gpu, util_percent, mem_used_bytes, mem_total_bytes
FROM system_gpus
WHERE run = $run AND step = $step
ORDER BY "time", gpu
