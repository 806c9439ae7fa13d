-- title: Check a bulk insert for infinities
-- description: After the fast path inserted a chunk, inside the same transaction: for each
--   named metric column, whether a row just inserted holds +-Infinity. DuckDB's JSON reader
--   turns a number beyond a double (1e400) into Infinity without a word, so such a chunk is
--   rolled back and read by the careful path, which records a warning for each.
-- identifier table: metric_rows or ranks_all (example: metric_rows)
-- param file_id: file id (example: 1)
-- param attempt: the attempt just inserted (example: 1)
-- param first_step: the chunk's first step; its steps rise, so its rows are those from here (example: 0)
-- param names: the chunk's DOUBLE columns (example: ['elapsed_s'])
SELECT bool_or(isinf(COLUMNS(lambda c: list_contains($names, c))))
FROM {table}
WHERE file_id = $file_id AND attempt = $attempt AND step >= $first_step
