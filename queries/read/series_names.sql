-- title: Chart names of a run
-- description: The metrics and x axes a run has values of: those its tiles hold, and those
--   among `columns` with a value in each line file's lines after its tile watermark (the
--   part not yet in tiles; the watermark reaches that scan as a dynamic filter on rowid).
-- param run: run id (example: 'seed-cliff')
-- param columns: candidate columns: numeric metrics and the x axes (example: ['loss', 'elapsed_s'])
WITH marks AS (
    SELECT f.file_id, coalesce(m.last_line, -1) AS after
    FROM line_files AS f
    LEFT JOIN chart_tile_marks AS m USING (file_id)
    WHERE f.run = $run
), tail AS (
    SELECT s.* FROM (SELECT rowid AS "~line", * FROM metric_rows) AS s
    JOIN marks AS k ON s.file_id = k.file_id AND s."~line" > k.after
)
SELECT DISTINCT metric AS name
FROM chart_tile_values
WHERE file_id IN (SELECT file_id FROM marks)
UNION
SELECT unnest(list_filter(['elapsed_s', 'time'], lambda a: (a = 'elapsed_s' AND e) OR (a = 'time' AND t)))
FROM (SELECT bool_or(first_elapsed IS NOT NULL) AS e, bool_or(first_time IS NOT NULL) AS t
      FROM chart_tiles
      WHERE file_id IN (SELECT file_id FROM marks))
UNION
-- `OR c = 'step'`: never an empty set of columns; step itself is left out
SELECT DISTINCT name
FROM (UNPIVOT (SELECT COLUMNS(lambda c: list_contains($columns, c) OR c = 'step')::DOUBLE FROM tail)
      ON COLUMNS(*) INTO NAME name VALUE value)
WHERE name <> 'step'
