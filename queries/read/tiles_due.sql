-- title: Files with a tile's worth of lines not rolled
-- description: Metrics files with at least `tile` stored lines past their tile watermark: what
--   the tile worker rolls first when it starts (one scan, once per process).
-- param tile: lines in one tile (example: 512)
SELECT r.file_id
FROM metric_rows AS r
JOIN line_files AS f USING (file_id)
LEFT JOIN chart_tile_marks AS m USING (file_id)
WHERE r.rowid > coalesce(m.last_line, -1)
GROUP BY r.file_id
HAVING count(*) >= $tile
