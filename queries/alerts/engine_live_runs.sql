-- title: Live runs
-- description: Every run still running, plus the runs named (those with a stall pending or
--   firing, to resolve them once they end), with the same facts as alerts/engine_run_facts:
--   what the stall rule's timers judge, read whole on a full pass of the alert rules and kept
--   in memory between them.
-- param active: runs with a stall pending or firing (example: ['seed-cliff'])
WITH w AS (
    SELECT run, max(grew_at) FILTER (WHERE kind IN ('metrics', 'events', 'rank')) AS last_write,
           max(last_step) FILTER (WHERE kind = 'metrics') AS last_step
    FROM files
    GROUP BY run
)
SELECT r.run, coalesce(r.status, 'running') AS status, r.last_seen, w.last_write, w.last_step
FROM runs AS r
JOIN w USING (run)
WHERE coalesce(r.status, 'running') = 'running' OR list_contains($active, r.run)
ORDER BY r.run
