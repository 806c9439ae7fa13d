-- title: Runs table
-- description: One page of the runs (or of those whose name matches), in the one order the
--   Runs page and /api/runs show: live runs first (no run_end yet), then the most recently
--   written (files.grew_at: when the monitor saw a log grow, by its own clock, as the stall
--   rule reads it), then by
--   name. `total` is how many runs match, on every row; a page past the end is one row with
--   a NULL run that still says `total`. Only the runs and files tables are read (a row per
--   run and per file), never a metrics line: the page's lines, newest values and pace come
--   from read/runs_files, read/runs_file_end and read/runs_tail (each run's newest lines),
--   or read/runs_stats for /api/runs.
-- param search: part of a run name, any case; % and _ are plain characters (default: NULL) (example: 'seed')
-- param glob: a glob on the run name, any case, e.g. sweep3-* (default: NULL) (example: 'seed-*')
-- param status: live (no run_end yet), finished (ended), or NULL for both (default: NULL) (example: 'finished')
-- param limit: at most this many runs, or NULL for all (default: NULL) (example: 100)
-- param offset: runs skipped before the page (default: 0) (example: 0)
WITH written AS (
    SELECT run, max(grew_at) AS last_write
    FROM files
    WHERE kind <> 'run_meta'  -- every log: a line, an event, a rank's line
    GROUP BY run
), matching AS (
    SELECT r.run, coalesce(r.status, 'running') AS status, r.first_seen, r.last_seen,
           w.last_write,
           row_number() OVER (ORDER BY coalesce(r.status, 'running') = 'running' DESC,
                                       w.last_write DESC NULLS LAST, r.run) AS n
    FROM runs AS r
    LEFT JOIN written AS w USING (run)
    WHERE ($search IS NULL OR contains(lower(r.run), lower($search)))
      AND ($glob IS NULL OR lower(r.run) GLOB lower($glob))
      AND ($status IS NULL
           OR (coalesce(r.status, 'running') = 'running') = ($status = 'live'))
)
SELECT m.run, m.status, m.first_seen, m.last_seen, m.last_write, c.total
FROM (SELECT count(*) AS total FROM matching) AS c
LEFT JOIN matching AS m
    ON m.n > coalesce($offset, 0) AND ($limit IS NULL OR m.n <= coalesce($offset, 0) + $limit)
ORDER BY m.n
