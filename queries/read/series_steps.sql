-- title: Chart step span of a run
-- description: A run's first and last step over every attempt (the Run page's from/to
--   controls): from its tiles, and from each line file's lines after its tile watermark
--   (the watermark reaches that scan as a dynamic filter on rowid). NULLs: no lines.
-- param run: run id (example: 'seed-cliff')
WITH marks AS (
    SELECT f.file_id, coalesce(m.last_line, -1) AS after
    FROM line_files AS f
    LEFT JOIN chart_tile_marks AS m USING (file_id)
    WHERE f.run = $run
), steps AS (
    SELECT min(first_step) AS step0, max(last_step) AS step1
    FROM chart_tiles
    WHERE file_id IN (SELECT file_id FROM marks)
    UNION ALL
    SELECT min(s.step), max(s.step)
    FROM (SELECT rowid AS line, file_id, step FROM metric_rows) AS s
    JOIN marks AS k ON s.file_id = k.file_id AND s.line > k.after
)
SELECT min(step0) AS step0, max(step1) AS step1 FROM steps
