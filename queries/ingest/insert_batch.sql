-- title: Bulk-insert many new logs at once
-- description: The batched fast path (app/ingest/batch.py): one scratch file holding several
--   new, clean logs, each line carrying its file's id as the key file_id (added by the
--   ingest process, never by a log), read by DuckDB's own JSON reader into metric_rows as
--   each file's first attempt. Its first line names every key the files' first lines hold
--   (its step, the lowest BIGINT, is left out here; a log line with that step is left out
--   too, so its file's row count falls short and it goes back), so a key no first line
--   holds fails the read rather than being dropped. Fails, like ingest/insert_direct, on what it cannot vouch for: the caller
--   rolls back and stores the files another way.
-- param path: scratch file holding the files' lines (example: NULL)
-- param names: the DOUBLE keys in their files' own spelling (example: ['loss'])
INSERT INTO metric_rows BY NAME
SELECT 1 AS attempt, *
FROM read_json($path, format = 'newline_delimited', maximum_object_size = 1048576)
-- lines without a file_id (no scratch file of ours) store nothing: file_id is NOT NULL
WHERE len([*COLUMNS(lambda c: c = 'file_id' OR c = 'step')]) = 2
AND step > -9223372036854775808 AND CASE
    WHEN step IS NULL OR TRY_CAST(step AS BIGINT) IS DISTINCT FROM step
        THEN error('cliffwatch: a step is missing or not an integer')
    ELSE true
END
-- a row holding +-Infinity is left out, so its file's row count falls short (as in
-- ingest/insert_direct); step is listed so that COLUMNS always matches a column
AND isinf(COLUMNS(lambda c: c = 'step' OR list_contains($names, c))) IS NOT TRUE
