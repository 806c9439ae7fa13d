-- title: What the machine was doing: system.jsonl's samples
-- description: A run folder's `system.jsonl` (written by cliffwatch's sampler, one JSON object
--   every few seconds; docs/log-format.md) is a `files` row of kind `system`, read live and
--   exactly once like every log, and its lines land here, not in metric_rows: a sample is no
--   training line (`line_files` leaves it out, so it never starts an attempt, makes a stall
--   or counts as a run's last line). `system_samples`: one row per sample, host and process
--   CPU, memory, the run folder's disk and the network; `step` is the run's last logged step
--   when sampled (NULL before the first). Disk `*_bytes` are the bytes in the sample's
--   `sample_s` seconds, `*_bps` the same per second. `system_gpus`: one row per GPU per sample
--   (none without NVML), joined to its sample on (run, time). Any value a sampler did not
--   write is NULL. Both are offered to ad-hoc SQL.

CREATE TABLE system_samples (
    run VARCHAR NOT NULL,
    "time" DOUBLE,
    elapsed_s DOUBLE,
    step BIGINT,
    host VARCHAR,
    pid BIGINT,
    sample_s DOUBLE,
    cpu_percent DOUBLE,
    cpu_max_core_percent DOUBLE,
    cpu_count INTEGER,
    proc_cpu_percent DOUBLE,
    proc_rss_bytes BIGINT,
    mem_used_bytes BIGINT,
    mem_total_bytes BIGINT,
    swap_used_bytes BIGINT,
    disk VARCHAR,
    disk_read_bps DOUBLE,
    disk_write_bps DOUBLE,
    disk_read_bytes BIGINT,
    disk_write_bytes BIGINT,
    net_recv_bps DOUBLE,
    net_sent_bps DOUBLE
);

CREATE TABLE system_gpus (
    run VARCHAR NOT NULL,
    "time" DOUBLE,
    step BIGINT,
    host VARCHAR,
    gpu INTEGER,
    util_percent DOUBLE,
    mem_used_bytes BIGINT,
    mem_total_bytes BIGINT,
    power_w DOUBLE,
    temp_c DOUBLE
);

CREATE OR REPLACE VIEW line_files AS
SELECT * FROM files WHERE kind NOT IN ('events', 'rank', 'run_meta', 'save', 'system');
