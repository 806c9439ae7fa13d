-- title: Runs table
-- description: One page of the runs (or of those whose name matches), in the one order the
--   Runs page and /api/runs show: live runs first (no run_end yet; a run from another
--   trainer, whose log writes none, is live until its log marks the end of training
--   (run_status) or has not grown for `idle_after` seconds), then the most recently
--   written (files.grew_at: when the monitor saw a log grow, by its own clock, as the stall
--   rule reads it), then by
--   name. `total` is how many runs match, on every row; a page past the end is one row with
--   a NULL run that still says `total`. `log_ended`: NULL for runs in our own format, else
--   whether the log marks the end of training. Only the runs and files tables and the
--   summary rows of eval_rows are read (run_status), never a metrics line: the page's lines, newest values and pace come
--   from read/runs_files, read/runs_file_end and read/runs_tail (each run's newest lines),
--   or read/runs_stats for /api/runs.
-- param search: part of a run name, any case; % and _ are plain characters (default: NULL) (example: 'seed')
-- param glob: a glob on the run name, any case, e.g. sweep3-* (default: NULL) (example: 'seed-*')
-- param status: live (no run_end yet), finished (ended, or idle), or NULL for both (default: NULL) (example: 'finished')
-- param now: Unix seconds now, for `idle_after`; NULL: no run is idle (default: NULL) (example: 1700000000.0)
-- param idle_after: seconds without growth after which a run from another trainer is no longer live (default: 300) (example: 300.0)
-- param limit: at most this many runs, or NULL for all (default: NULL) (example: 100)
-- param offset: runs skipped before the page (default: 0) (example: 0)
WITH written AS (
    SELECT run, max(grew_at) AS last_write
    FROM files
    -- every log: a line, an event, a rank's line; not system.jsonl, whose sampler writes on
    -- through a stall
    WHERE kind NOT IN ('run_meta', 'system')
    GROUP BY run
), listed AS (
    SELECT r.run, s.status, r.first_seen, r.last_seen, w.last_write,
           CASE WHEN s.other_trainer THEN s.log_ended END AS log_ended,
           s.status = 'running' AND NOT (s.other_trainer AND $now IS NOT NULL
               AND coalesce(w.last_write < $now - coalesce($idle_after, 300), false)) AS live
    FROM runs AS r
    JOIN run_status AS s USING (run)
    LEFT JOIN written AS w USING (run)
    WHERE ($search IS NULL OR contains(lower(r.run), lower($search)))
      AND ($glob IS NULL OR lower(r.run) GLOB lower($glob))
), matching AS (
    SELECT *, row_number() OVER (ORDER BY live DESC, last_write DESC NULLS LAST, run) AS n
    FROM listed
    WHERE $status IS NULL OR live = ($status = 'live')
)
SELECT m.run, m.status, m.first_seen, m.last_seen, m.last_write, m.log_ended, c.total
FROM (SELECT count(*) AS total FROM matching) AS c
LEFT JOIN matching AS m
    ON m.n > coalesce($offset, 0) AND ($limit IS NULL OR m.n <= coalesce($offset, 0) + $limit)
ORDER BY m.n
