-- title: Files to roll into chart tiles
-- description: Every line file (rank files are not charted) with its tile watermark: lines
--   rolled and the rowid, attempt, step and time of the last rolled line (-1 and NULLs: none).
SELECT f.file_id, coalesce(m.lines, 0) AS lines, coalesce(m.last_line, -1) AS last_line,
       m.last_attempt, m.last_step, m.last_t
FROM line_files AS f
LEFT JOIN chart_tile_marks AS m USING (file_id)
ORDER BY f.file_id
