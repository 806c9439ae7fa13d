-- title: Run markers
-- description: What to mark on a run's charts: checkpoint saves as spans from
--   checkpoint_start to its checkpoint_end (one still open ends at the run's newest line, or
--   at the next checkpoint_start if the trainer started another), epoch_start events and
--   resumes (attempt > 1) as rules, incidents as spans from step to end_step (labelled
--   with their worst value and the step it was logged at, `worst_step`), and alert
--   firings, each with a tooltip label and the evidence. Only markers that overlap steps
--   lo..hi. e0/t0 and e1/t1 are the elapsed_s and time of each end where the event itself
--   says them (else NULL: app/read/markers.py places them at the run's logged lines, in the
--   line files (line_files) `files`). Reads the small tables (events, attempts, incidents,
--   alert_transitions) and, for the run's newest line, only each line file's lines from
--   its tile watermark on (it reaches the scan as a dynamic filter on rowid), as the Runs
--   table finds it: one round trip.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step of the range, or NULL from the start (default: NULL) (example: 0)
-- param hi: last step of the range, or NULL to the end (default: NULL) (example: 5000)
WITH marks AS (
    SELECT f.file_id, coalesce(m.last_line, -1) AS after
    FROM line_files AS f
    LEFT JOIN chart_tile_marks AS m USING (file_id)
    WHERE f.run = $run
), newest AS MATERIALIZED (  -- the run's newest logged line (any attempt), where an open
    -- checkpoint ends: the last rolled line of each file or a line after it
    SELECT s.step, s.elapsed_s::DOUBLE AS elapsed_s, s."time"::DOUBLE AS "time"
    FROM (
        SELECT rowid AS line, * FROM metric_rows
        UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
        SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
    ) AS s
    JOIN marks AS k ON s.file_id = k.file_id AND s.line >= k.after
    ORDER BY s.line DESC
    LIMIT 1
), ev AS MATERIALIZED (
    SELECT kind, step, elapsed_s, "time", data,
           row_number() OVER (ORDER BY file_id, "offset") AS n
    FROM events
    WHERE run = $run
), saves AS MATERIALIZED (
    SELECT kind, step, elapsed_s, "time", data,
           lag(kind) OVER w AS prev_kind, lead(kind) OVER w AS next_kind,
           lead(step) OVER w AS next_step, lead(elapsed_s) OVER w AS next_elapsed,
           lead("time") OVER w AS next_time, lead(data) OVER w AS next_data
    FROM ev
    WHERE kind IN ('checkpoint_start', 'checkpoint_end')
    WINDOW w AS (ORDER BY n)
), checkpoint AS (
    SELECT s.step, coalesce(s.next_step, (SELECT step FROM newest)) AS end_step,
           s.elapsed_s AS e0, s."time" AS t0,
           CASE WHEN s.next_kind IS NULL THEN (SELECT elapsed_s FROM newest)
                ELSE s.next_elapsed END AS e1,
           CASE WHEN s.next_kind IS NULL THEN (SELECT "time" FROM newest)
                ELSE s.next_time END AS t1,
           s.data->>'path' AS path, s.next_kind,
           TRY_CAST(s.next_data->>'blocked_s' AS DOUBLE) AS blocked_s,
           TRY_CAST(s.next_data->>'duration_s' AS DOUBLE) AS duration_s
    FROM saves AS s
    WHERE s.kind = 'checkpoint_start'
), lone_end AS (
    -- a checkpoint_end with no start before it: the span its own duration says
    SELECT step, elapsed_s, "time", data->>'path' AS path,
           TRY_CAST(data->>'blocked_s' AS DOUBLE) AS blocked_s,
           TRY_CAST(data->>'duration_s' AS DOUBLE) AS duration_s
    FROM saves
    WHERE kind = 'checkpoint_end' AND prev_kind IS DISTINCT FROM 'checkpoint_start'
), raw AS (
    SELECT 'checkpoint' AS kind, '' AS detail, step, end_step, e0, t0, e1, t1,
           'checkpoint ' || coalesce(path, '?') || ' at step ' || step || CASE
               WHEN next_kind = 'checkpoint_end' THEN
                   ': saved in ' || coalesce(format('{:.1f}', duration_s), '?')
                   || ' s, the training loop was blocked '
                   || coalesce(format('{:.1f}', blocked_s), '?') || ' s'
               WHEN next_kind IS NULL THEN ': not finished by the newest line'
               ELSE ': never finished (another checkpoint started)' END AS label
    FROM checkpoint
    UNION ALL
    SELECT 'checkpoint', '', step, step, elapsed_s - coalesce(duration_s, 0),
           "time" - coalesce(duration_s, 0), elapsed_s, "time",
           'checkpoint ' || coalesce(path, '?') || ' at step ' || step || ': saved in '
           || coalesce(format('{:.1f}', duration_s), '?') || ' s, the training loop was blocked '
           || coalesce(format('{:.1f}', blocked_s), '?') || ' s'
    FROM lone_end
    UNION ALL
    SELECT 'epoch', '', step, step, elapsed_s, "time", elapsed_s, "time",
           'epoch ' || coalesce(data->>'epoch', '?') || ' begins at step ' || step
    FROM ev
    WHERE kind = 'epoch_start'
    UNION ALL
    SELECT 'resume', '', a.start_step, a.start_step, NULL, NULL, NULL, NULL,
           'resume: attempt ' || a.attempt || ' starts at step ' || a.start_step
           || coalesce(' (the attempt before reached step ' || a.prev_step || ')', '')
           || ', ' || replace(a.reason, '_', ' ')
    FROM attempts AS a
    WHERE a.run = $run AND a.attempt > 1
    UNION ALL
    SELECT 'incident', kind, step, end_step, NULL, NULL, NULL, NULL,
           kind || ' in ' || metric || ' at step ' || step
           -- the episode's worst value where it was logged: "peak 13 at step 2029"
           || coalesce(': ' || CASE kind WHEN 'spike' THEN 'peak ' WHEN 'cliff' THEN 'bottom '
                                         ELSE '' END || format('{:.4g}', value)
                       || CASE WHEN worst_step <> step THEN ' at step ' || worst_step
                               ELSE '' END, '')
           || coalesce(' (typical ' || format('{:.4g}', baseline) || ')', '')
           || CASE WHEN end_step > step THEN ', through step ' || end_step ELSE '' END
           || CASE WHEN len(causes) > 0
                   THEN '. Likely cause: ' || array_to_string(causes, ', ') ELSE '' END
           || CASE WHEN len(evidence) > 0
                   THEN '. ' || array_to_string(evidence, ' ') ELSE '' END
    FROM incidents
    WHERE run = $run
    UNION ALL
    SELECT 'alert', rule || ': firing', step, step, NULL, NULL, NULL, NULL,
           'alert ' || rule || ' fired'
           || CASE WHEN metric <> '' THEN ' on ' || metric ELSE '' END
           || ' at step ' || step
           || coalesce(': ' || format('{:.4g}', value), '')
    FROM alert_transitions
    WHERE run = $run AND to_state = 'firing' AND step IS NOT NULL
), inside AS (
    SELECT * FROM raw
    WHERE step IS NOT NULL
      AND ($lo IS NULL OR coalesce(end_step, step) >= $lo)
      AND ($hi IS NULL OR step <= $hi)
)
SELECT kind, detail, step, coalesce(end_step, step) AS end_step, e0::DOUBLE AS e0,
       t0::DOUBLE AS t0, e1::DOUBLE AS e1, t1::DOUBLE AS t1, label,
       (SELECT list(file_id ORDER BY file_id) FROM marks) AS files
FROM inside
ORDER BY step, kind, e0, t0
