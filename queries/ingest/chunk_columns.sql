-- title: Columns of a chunk
-- description: The keys and types DuckDB's JSON reader detects in a scratch chunk, to add
--   columns for new metric keys before the fast path inserts it.
-- param path: scratch file holding complete lines (example: NULL)
DESCRIBE SELECT * FROM read_json($path, format = 'newline_delimited', maximum_object_size = 1048576)
