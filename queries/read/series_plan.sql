-- title: Chart plan
-- description: Per file and attempt of a run, its tiles that overlap steps [lo, hi]: lines in
--   them, lines and x span of those wholly inside, the rowids they cover with the line before
--   (for raw reads), and the tiles only partly inside (read raw: at most one at each end).
--   Then (tail = true) each file's lines after its tile watermark with steps in [lo, hi] and
--   an x: their count, x and step span, and the last rolled line (`after`, prev_*) a raw read
--   of them starts from. The watermark reaches the scan as a dynamic filter on rowid, so only
--   the tail's row groups are read. One query: a chart read's plan in one round trip.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step, NULL for open (example: NULL)
-- param hi: last step, NULL for open (example: NULL)
-- param x: step, elapsed or time (example: 'step')
WITH marks AS (
    SELECT f.file_id, coalesce(m.last_line, -1) AS after, m.last_attempt, m.last_step,
           m.last_t
    FROM line_files AS f
    LEFT JOIN chart_tile_marks AS m USING (file_id)
    WHERE f.run = $run
), t AS (
    SELECT *,
        CASE $x WHEN 'step' THEN first_step::DOUBLE WHEN 'elapsed' THEN first_elapsed ELSE first_time END AS x0_logged,
        CASE $x WHEN 'step' THEN last_step::DOUBLE WHEN 'elapsed' THEN last_elapsed ELSE last_time END AS x1_logged,
        -- inf and NaN are no place on an axis: a tile end that is not finite is none
        CASE WHEN isfinite(x0_logged) THEN x0_logged END AS x0,
        CASE WHEN isfinite(x1_logged) THEN x1_logged END AS x1,
        first_step >= coalesce($lo, first_step) AND last_step <= coalesce($hi, last_step)
            AS inside
    FROM chart_tiles
    WHERE file_id IN (SELECT file_id FROM marks)
        AND last_step >= coalesce($lo, last_step) AND first_step <= coalesce($hi, first_step)
), src AS (
    SELECT rowid AS line, * FROM metric_rows
    UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
), tail AS (
    SELECT s.file_id, s.attempt, s.step, k.after, k.last_attempt, k.last_step, k.last_t,
        CASE $x WHEN 'step' THEN s.step::DOUBLE WHEN 'elapsed' THEN s.elapsed_s ELSE s."time" END AS x_logged,
        -- inf and NaN are no place on an axis: such a line has no x
        CASE WHEN isfinite(x_logged) THEN x_logged END AS x
    FROM src AS s
    JOIN marks AS k ON s.file_id = k.file_id AND s.line > k.after
    WHERE s.step BETWEEN coalesce($lo, s.step) AND coalesce($hi, s.step)
)
SELECT false AS tail, file_id, attempt, sum(n)::BIGINT AS lines,
       coalesce(sum(n) FILTER (inside), 0)::BIGINT AS inside_lines,
       min(x0) FILTER (inside AND x0 IS NOT NULL) AS x0,
       max(x1) FILTER (inside AND x0 IS NOT NULL) AS x1,
       count(*) FILTER (inside AND x0 IS NULL) AS unplaced,
       min(first_step) FILTER (inside) AS step0, max(last_step) FILTER (inside) AS step1,
       min(first_line) - 1 AS after, max(last_line) AS upto, attempt AS prev_attempt,
       first(prev_step ORDER BY tile) AS prev_step, first(prev_t ORDER BY tile) AS prev_t,
       list({'after': first_line - 1, 'upto': last_line, 'prev_step': prev_step,
              'prev_t': prev_t} ORDER BY tile) FILTER (NOT inside) AS edges
FROM t
GROUP BY file_id, attempt
UNION ALL
SELECT true AS tail, file_id, attempt, count(*) AS lines, 0 AS inside_lines, min(x) AS x0,
       max(x) AS x1, 0 AS unplaced, min(step) AS step0, max(step) AS step1,
       any_value(after) AS after, NULL AS upto, any_value(last_attempt) AS prev_attempt,
       any_value(last_step) AS prev_step, any_value(last_t) AS prev_t, NULL AS edges
FROM tail
WHERE x IS NOT NULL
GROUP BY file_id, attempt
ORDER BY tail, file_id, attempt
