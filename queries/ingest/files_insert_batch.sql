-- title: Track many files
-- description: ingest/file_insert for several newly found files in one statement (lists of
--   equal length); returns each one's id with its path.
-- param runs: run ids (example: ['example/run'])
-- param paths: paths relative to the log directory (example: ['example/run/metrics.jsonl'])
-- param kinds: file kinds (example: ['metrics'])
INSERT INTO files (file_id, run, path, kind)
SELECT nextval('file_ids'), run, path, kind
FROM (SELECT unnest($runs) AS run, unnest($paths) AS path, unnest($kinds) AS kind)
RETURNING file_id, path
