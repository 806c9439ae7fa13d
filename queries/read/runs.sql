-- title: Runs table
-- description: Every run (or those whose name contains `search`) for the Runs page, running
--   runs first, then the most recently written: its status from run_start/run_end events and
--   when its log files were last written (files.mtime: the trainer's own clock, as the stall
--   rule reads it). Its lines, newest values and pace come from read/runs_files,
--   read/runs_file_end and read/runs_tail: reads of each run's newest lines only.
-- param search: part of a run name, or NULL for every run (default: NULL) (example: 'seed')
-- param limit: at most this many runs, or NULL for all (default: NULL) (example: 100)
WITH written AS (
    SELECT run, max(mtime) AS last_write
    FROM files
    WHERE kind IN ('metrics', 'events', 'rank')
    GROUP BY run
)
SELECT r.run, coalesce(r.status, 'running') AS status, r.last_seen, w.last_write
FROM runs AS r
LEFT JOIN written AS w USING (run)
WHERE $search IS NULL OR contains(lower(r.run), lower($search))
ORDER BY coalesce(r.status, 'running') = 'running' DESC, w.last_write DESC NULLS LAST, r.run
LIMIT coalesce($limit, 9223372036854775807)
