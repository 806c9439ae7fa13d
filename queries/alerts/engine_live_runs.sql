-- title: Live runs
-- description: Every run still running (run_status: no run_end, or another trainer's log
--   that does not mark the end of training yet), plus the runs named (those with a stall pending or
--   firing, to resolve them once they end), with the same facts as alerts/engine_run_facts:
--   what the stall rule's timers judge, read whole on a full pass of the alert rules and kept
--   in memory between them.
-- param active: runs with a stall pending or firing (example: ['seed-cliff'])
WITH w AS (
    -- system.jsonl is no log of the loop: its sampler writes on through a stall
    SELECT f.run, max(f.grew_at) FILTER (WHERE f.kind NOT IN ('run_meta', 'system'))
               AS last_write,
           max(l.last_step) AS last_step
    FROM files AS f
    LEFT JOIN line_files AS l USING (file_id)
    GROUP BY f.run
)
SELECT r.run, s.status, r.last_seen, w.last_write, w.last_step
FROM runs AS r
JOIN run_status AS s USING (run)
JOIN w USING (run)
WHERE s.status = 'running' OR list_contains($active, r.run)
ORDER BY r.run
