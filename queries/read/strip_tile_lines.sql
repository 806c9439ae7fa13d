-- title: Bucket strip, lines from tiles
-- description: How many of a run's lines lie in chart tiles (app/read/tiles.py) that overlap
--   steps lo..hi, read from the tiles alone: whether a range is so long that the strip must
--   merge cells, without counting its lines one by one.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step, or NULL from the start (default: NULL) (example: 0)
-- param hi: last step, or NULL to the end (default: NULL) (example: 5000)
SELECT coalesce(sum(n), 0)::BIGINT AS lines
FROM chart_tiles
WHERE file_id IN (SELECT file_id FROM line_files WHERE run = $run)
  AND last_step >= coalesce($lo, last_step) AND first_step <= coalesce($hi, first_step)
