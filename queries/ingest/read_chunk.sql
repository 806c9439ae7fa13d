-- title: Bulk-parse a chunk
-- description: DuckDB's own JSON reader on a scratch copy of complete lines. Auto-detection
--   raises on a key it did not sample and on a type it cannot convert, and lines over 1 MiB
--   fail; ingest then falls back to reading that chunk line by line.
-- param path: scratch file holding complete lines (example: NULL)
SELECT * FROM read_json($path, format = 'newline_delimited', maximum_object_size = 1048576)
