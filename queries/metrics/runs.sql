-- title: Prometheus: runs exported
-- description: The runs GET /metrics reports on: a run without run_end whose logs were
--   written (files.grew_at: when the monitor saw them grow, by its own clock, as the Runs page
--   and the stall rule read it) within `silence_s`
--   seconds, or an ended run within `grace_s` seconds of its last write; at most `max_runs`,
--   the most recently written first. Only files written within the longer window are
--   grouped, so thousands of finished runs cost a filter of the files table, never a read of
--   their lines. Per run: its status, last write, and its newest metrics file (written last):
--   its id, last step, and the rowid of its last line rolled into chart tiles (-1: none yet).
-- param now: Unix seconds now (example: 1700000000.0)
-- param grace_s: seconds an ended run stays after its last write (example: 900.0)
-- param silence_s: seconds a run without run_end stays after its last write (example: 21600.0)
-- param max_runs: at most this many runs (example: 500)
WITH recent AS (
    SELECT run, max(grew_at) AS last_write
    FROM files
    -- not system.jsonl: its sampler writes on through a stall
    WHERE kind NOT IN ('run_meta', 'system') AND grew_at >= $now - greatest($grace_s, $silence_s)
    GROUP BY run
), exported AS (
    SELECT r.run, r.status, w.last_write
    FROM recent AS w
    JOIN run_status AS r USING (run)
    WHERE w.last_write >= $now - CASE WHEN r.status = 'running'
                                      THEN $silence_s ELSE $grace_s END
    ORDER BY w.last_write DESC, r.run
    LIMIT greatest($max_runs, 0)
), newest AS (
    SELECT run, arg_max(file_id, grew_at) AS file_id
    FROM line_files
    WHERE run IN (SELECT run FROM exported)
    GROUP BY run
)
SELECT e.run, e.status, e.last_write, n.file_id, f.last_step,
       coalesce(m.last_line, -1) AS after
FROM exported AS e
LEFT JOIN newest AS n USING (run)
LEFT JOIN files AS f USING (file_id)
LEFT JOIN chart_tile_marks AS m USING (file_id)
ORDER BY e.last_write DESC, e.run
