-- title: Typical interval from tiles
-- description: The median over a run's tiles of their mean seconds between lines: a long
--   run's typical interval without reading every line (a stall moves one tile's mean).
-- param run: run id (example: 'seed-cliff')
SELECT median(sum / nullif(n - nonfinite, 0)) AS typical_s
FROM chart_tile_values
WHERE metric = '~gap_s'
    AND file_id IN (SELECT file_id FROM line_files WHERE run = $run)
