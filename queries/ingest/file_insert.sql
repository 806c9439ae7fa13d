-- title: Track a file
-- description: Registers a newly found log file and returns its id.
-- param run: run id (example: 'example/run')
-- param path: path relative to the log directory (example: 'example/run/metrics.jsonl')
-- param kind: metrics, events, rank or run_meta (example: 'metrics')
INSERT INTO files (file_id, run, path, kind)
VALUES (nextval('file_ids'), $run, $path, $kind)
RETURNING file_id
