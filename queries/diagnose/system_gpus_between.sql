-- title: GPU samples between two times
-- description: One run's per-GPU samples (system.jsonl's `gpus`, table system_gpus) taken
--   from Unix time lo to hi, oldest first: utilisation and memory, what a stall's machine
--   evidence reads (app/diagnose/system.py).
-- param run: run id (example: 'seed-cliff')
-- param lo: first Unix time (example: 0)
-- param hi: last Unix time (example: 1e10)
SELECT "time", gpu, util_percent, mem_used_bytes, mem_total_bytes
FROM system_gpus
WHERE run = $run AND "time" BETWEEN $lo AND $hi
ORDER BY "time", gpu
