-- title: Chart files of a run
-- description: A run's line files with their tile watermark: the raw tail of each starts
--   after rowid `after`, its first gap measured from the last rolled line.
-- param run: run id (example: 'seed-cliff')
SELECT f.file_id, coalesce(m.lines, 0) AS rolled, coalesce(m.last_line, -1) AS after,
       m.last_attempt AS prev_attempt, m.last_step AS prev_step, m.last_t AS prev_t
FROM line_files AS f
LEFT JOIN chart_tile_marks AS m USING (file_id)
WHERE f.run = $run
ORDER BY f.file_id
