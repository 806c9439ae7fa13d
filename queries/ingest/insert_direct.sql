-- title: Bulk-insert a clean chunk
-- description: The fast path: DuckDB's own JSON reader on a scratch copy of complete lines,
--   straight into metric_rows as one attempt. It fails -- and ingest rolls back and reads the
--   chunk line by line instead -- on anything it cannot vouch for: a key it did not sample, a
--   value it cannot convert, a line over 1 MiB, a key with no column yet, a missing step, or
--   a step that does not rise (a resume). lag() over an empty OVER () keeps the file's order.
-- param path: scratch file holding complete lines (example: NULL)
-- param attempt: attempt of every row (example: 1)
-- param file_id: file id (example: 1)
-- param prev_step: last step already stored for this attempt, or NULL (example: NULL)
INSERT INTO metric_rows BY NAME
SELECT $attempt AS attempt, $file_id AS file_id, * EXCLUDE (cliffwatch_prev)
FROM (
    SELECT *, lag(step) OVER () AS cliffwatch_prev
    FROM read_json($path, format = 'newline_delimited', maximum_object_size = 1048576)
)
WHERE CASE
    WHEN step IS NULL OR step <= coalesce(cliffwatch_prev, $prev_step)
        OR TRY_CAST(step AS BIGINT) IS DISTINCT FROM step
        THEN error('cliffwatch: not one rising attempt')
    ELSE true
END
