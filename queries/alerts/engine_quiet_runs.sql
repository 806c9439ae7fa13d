-- title: Quiet runs
-- description: Runs still running whose files were last written before a time, plus the runs
--   named (those with a stall pending or firing, to resolve them), with the time their files
--   were last written (file mtime: the trainer's own write, true across a server restart).
-- param quiet_before: Unix time (example: 0.0)
-- param active: runs with a stall pending or firing (example: ['seed-cliff'])
WITH w AS (
    SELECT run, max(mtime) AS last_write,
           max(last_step) FILTER (WHERE kind = 'metrics') AS last_step
    FROM files
    WHERE kind IN ('metrics', 'events', 'rank')
    GROUP BY run
)
SELECT r.run, coalesce(r.status, 'running') AS status, w.last_write, w.last_step,
       p.first_time, p.history_step, p.last_line
FROM runs AS r
JOIN w USING (run)
LEFT JOIN alert_progress AS p USING (run)
WHERE list_contains($active, r.run)
   OR (coalesce(r.status, 'running') = 'running' AND w.last_write < $quiet_before)
ORDER BY r.run
