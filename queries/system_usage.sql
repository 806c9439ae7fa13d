-- title: System usage
-- description: What the machine did over each run that writes system.jsonl (system_samples,
--   system_gpus): samples and the seconds they span, mean and peak host CPU, the busiest
--   core's peak, the process's peak RSS, the peak share of host memory and of each GPU's
--   memory in use, peak swap, the peak disk write rate and the bytes written, and the mean
--   and lowest GPU utilisation (an idle GPU during training is an input-bound loop). A
--   starting point for ad-hoc SQL over both tables.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
WITH gpus AS (
    SELECT run, avg(util_percent) AS gpu_util_mean, min(util_percent) AS gpu_util_min,
           max(mem_used_bytes / nullif(mem_total_bytes, 0)) * 100 AS gpu_mem_peak_percent,
           count(DISTINCT gpu) AS gpus
    FROM system_gpus
    WHERE $run IS NULL OR run = $run
    GROUP BY run
)
SELECT s.run, count(*) AS samples, round(max(s."time") - min(s."time"), 1) AS seconds,
       round(avg(s.cpu_percent), 1) AS cpu_mean, max(s.cpu_percent) AS cpu_peak,
       max(s.cpu_max_core_percent) AS core_peak,
       round(max(s.proc_rss_bytes) / 2 ^ 30, 2) AS rss_peak_gib,
       round(max(s.mem_used_bytes / nullif(s.mem_total_bytes, 0)) * 100, 1) AS mem_peak_percent,
       round(max(s.swap_used_bytes) / 2 ^ 30, 2) AS swap_peak_gib,
       round(max(s.disk_write_bps) / 1e6, 1) AS disk_write_peak_mb_s,
       round(sum(s.disk_write_bytes) / 1e9, 2) AS disk_written_gb,
       coalesce(any_value(g.gpus), 0) AS gpus,
       round(any_value(g.gpu_util_mean), 1) AS gpu_util_mean,
       any_value(g.gpu_util_min) AS gpu_util_min,
       round(any_value(g.gpu_mem_peak_percent), 1) AS gpu_mem_peak_percent
FROM system_samples AS s
LEFT JOIN gpus AS g USING (run)
WHERE $run IS NULL OR s.run = $run
GROUP BY s.run
ORDER BY s.run
