-- title: Bulk-insert a clean chunk of a rank file
-- description: The fast path: DuckDB's own JSON reader on complete lines, straight into
--   ranks_all as one attempt. The caller has checked that steps are integers rising line by
--   line (app/ingest/chunk.py); this statement fails -- and ingest rolls back and reads the
--   chunk line by line instead -- on what else it cannot vouch for: a key it did not sample,
--   a value it cannot convert, a line over 1 MiB, a key with no column yet, a step that is
--   missing or not an integer.
-- param path: file holding complete lines (example: NULL)
-- param attempt: attempt of every row (example: 1)
-- param file_id: file id (example: 1)
-- param run: run id (example: 'example/run')
-- param rank: the writing rank (example: 0)
-- param names: the chunk's own spelling of its DOUBLE keys (example: ['loss'])
INSERT INTO ranks_all BY NAME
SELECT $run AS run, $attempt AS attempt, $file_id AS file_id, $rank AS rank,
       COLUMNS(lambda c: c <> 'rank')
FROM read_json($path, format = 'newline_delimited', maximum_object_size = 1048576)
WHERE CASE
    WHEN step IS NULL OR TRY_CAST(step AS BIGINT) IS DISTINCT FROM step
        THEN error('cliffwatch: a step is missing or not an integer')
    ELSE true
END
-- A row holding +-Infinity in a metric is left out, so the count of rows written falls short
-- and the chunk goes back: DuckDB's reader turns a number beyond a double (1e400) into
-- Infinity without a word, where the careful path records a warning (a filter row by row
-- keeps the read parallel; a query after the insert cost a second scan). step is listed
-- too: COLUMNS must match at least one column, and a step is never infinite.
AND isinf(COLUMNS(lambda c: c = 'step' OR list_contains($names, c))) IS NOT TRUE
