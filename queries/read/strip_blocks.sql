-- title: Bucket strip, blocks of a long range
-- description: A run's lines in steps lo..hi as blocks of consecutive lines, where a strip
--   too long to count is merged from: its chart tiles that overlap the range (app/read/
--   tiles.py), then each line file's lines after its tile watermark in blocks of `tile`
--   lines (the watermark reaches that scan as a dynamic filter on rowid). Per block: its
--   file and attempt, the rowids of its first and last line, lines, first step, where it
--   starts and ends in the x unit, and its attempt's cutoff (lines at or past that step are
--   off the run's current timeline). Blocks wholly off that timeline are left out.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step, or NULL from the start (default: NULL) (example: 0)
-- param hi: last step, or NULL to the end (default: NULL) (example: 5000)
-- param x: position unit, 'step', 'elapsed' or 'time' (default: 'step') (example: 'step')
-- param tile: lines per block of the untiled tail (example: 512)
WITH marks AS (
    SELECT f.file_id, coalesce(m.last_line, -1) AS after
    FROM line_files AS f
    LEFT JOIN chart_tile_marks AS m USING (file_id)
    WHERE f.run = $run
), cut AS (
    SELECT attempt, cutoff_step FROM attempt_cutoffs WHERE run = $run
), src AS (
    SELECT rowid AS line, * FROM metric_rows
    UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
), tail AS (
    SELECT s.file_id, s.attempt, s.line, s.step,
        CASE coalesce($x, 'step') WHEN 'elapsed' THEN s.elapsed_s WHEN 'time' THEN s."time"
             ELSE s.step END::DOUBLE AS pos,
        (row_number() OVER (PARTITION BY s.file_id, s.attempt ORDER BY s.line) - 1) // $tile
            AS block
    FROM src AS s
    JOIN marks AS k ON s.file_id = k.file_id AND s.line > k.after
    WHERE ($lo IS NULL OR s.step >= $lo) AND ($hi IS NULL OR s.step <= $hi)
), blocks AS (
    SELECT t.file_id, t.attempt, t.first_line, t.last_line, t.n AS lines, t.first_step,
        CASE coalesce($x, 'step') WHEN 'elapsed' THEN t.first_elapsed
             WHEN 'time' THEN t.first_time ELSE t.first_step END::DOUBLE AS x0,
        CASE coalesce($x, 'step') WHEN 'elapsed' THEN t.last_elapsed
             WHEN 'time' THEN t.last_time ELSE t.last_step END::DOUBLE AS x1
    FROM chart_tiles AS t
    WHERE t.file_id IN (SELECT file_id FROM marks)
      AND t.last_step >= coalesce($lo, t.last_step) AND t.first_step <= coalesce($hi, t.first_step)
    UNION ALL
    SELECT file_id, attempt, min(line), max(line), count(*), min(step), min(pos), max(pos)
    FROM tail
    GROUP BY file_id, attempt, block
)
SELECT b.*, c.cutoff_step
FROM blocks AS b
LEFT JOIN cut AS c USING (attempt)
WHERE c.cutoff_step IS NULL OR b.first_step < c.cutoff_step
ORDER BY b.file_id, b.first_line
