-- title: Tile watermarks of some files
-- description: tiles_files for the given file ids only.
-- param files: file ids (example: [1])
SELECT f.file_id, coalesce(m.lines, 0) AS lines, coalesce(m.last_line, -1) AS last_line,
       m.last_attempt, m.last_step, m.last_t
FROM line_files AS f
LEFT JOIN chart_tile_marks AS m USING (file_id)
WHERE f.file_id IN (SELECT unnest($files))
ORDER BY f.file_id
