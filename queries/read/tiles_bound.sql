-- title: Chart tile chunk bound
-- description: The rowid of the last line of the next chunk to roll: the `lines`-th line of a
--   file after rowid `after` (no row: fewer lines than that are stored).
-- param file: file id (example: 1)
-- param after: rowid of the last line already rolled, -1 for none (example: -1)
-- param lines: lines in the chunk, a multiple of the tile size (example: 1)
SELECT rowid AS line
FROM metric_rows
WHERE file_id = $file AND rowid > $after
ORDER BY rowid
LIMIT 1 OFFSET $lines - 1
