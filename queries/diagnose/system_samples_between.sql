-- title: System samples between two times
-- description: One run's system samples (system.jsonl) taken from Unix time lo to hi, oldest
--   first, with what a stall's machine evidence reads (app/diagnose/system.py): the disk's
--   written bytes, swap and memory, the busiest CPU core and the process's CPU. A sample
--   covers the `sample_s` seconds up to its `time`.
-- param run: run id (example: 'seed-cliff')
-- param lo: first Unix time (example: 0)
-- param hi: last Unix time (example: 1e10)
SELECT "time", sample_s, disk, disk_write_bytes, disk_write_bps, swap_used_bytes,
       mem_used_bytes, mem_total_bytes, cpu_max_core_percent, cpu_count, proc_cpu_percent
FROM system_samples
WHERE run = $run AND "time" BETWEEN $lo AND $hi
ORDER BY "time"
