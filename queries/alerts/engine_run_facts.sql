-- title: Facts of the runs of some files
-- description: For the runs the given files belong to: status (run_status: run_end's, or
--   completed once another trainer's log marks the end of training), last_seen (moved by ingest with
--   each run's lines and events), when the monitor last saw one of its log files grow
--   (files.grew_at: the monitor's own clock, stored, so true across a server restart; a file
--   server's skewed clock cannot move it) and its last step. What an alert pass reads of the
--   runs ingest stored something for (alerts/engine_changes).
-- param files: file ids (example: [1, 2])
WITH named AS (
    SELECT DISTINCT run FROM files WHERE file_id IN (SELECT unnest($files))
), w AS (
    -- system.jsonl is no log of the loop: its sampler writes on through a stall
    SELECT f.run, max(f.grew_at) FILTER (WHERE f.kind NOT IN ('run_meta', 'system'))
               AS last_write,
           max(l.last_step) AS last_step
    FROM files AS f
    LEFT JOIN line_files AS l USING (file_id)
    WHERE f.run IN (SELECT run FROM named)
    GROUP BY f.run
)
SELECT r.run, s.status, r.last_seen, w.last_write, w.last_step
FROM runs AS r
JOIN run_status AS s USING (run)
JOIN w USING (run)
ORDER BY r.run
