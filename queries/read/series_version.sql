-- title: Chart version of a run
-- description: Changes whenever a run gets lines (a cache key): its line files, lines
--   consumed and bytes read, and how far its tiles go.
-- param run: run id (example: 'seed-cliff')
SELECT count(*) AS files, coalesce(sum(f.lines), 0) AS lines,
       coalesce(sum(f."offset"), 0) AS bytes, coalesce(sum(m.lines), 0) AS rolled
FROM line_files AS f
LEFT JOIN chart_tile_marks AS m USING (file_id)
WHERE f.run = $run
