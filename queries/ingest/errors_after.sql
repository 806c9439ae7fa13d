-- title: Ingest errors recorded since
-- description: The ingest errors and warnings recorded after the first `after` ones, in the
--   order they were recorded: what `ingest --once` lists after its pass.
-- param after: how many rows ingest_errors held before (example: 0)
-- param max_rows: most rows to return (example: 20)
SELECT file, "offset", severity, reason
FROM ingest_errors
ORDER BY rowid
LIMIT $max_rows OFFSET $after
