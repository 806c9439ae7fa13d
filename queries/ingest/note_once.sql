-- title: Record a warning once
-- description: A warning about a path that is not a tracked file (a folder link that leads out
--   of the log directory), recorded unless the same warning about the same path is there.
-- param run: run the path would belong to (example: 'example/run')
-- param file: path relative to the log directory (example: 'example/link')
-- param reason: what is wrong and what to do (example: 'a link')
INSERT INTO ingest_errors (run, file, "offset", severity, reason)
SELECT $run, $file, NULL, 'warning', $reason
WHERE NOT EXISTS (SELECT 1 FROM ingest_errors WHERE file = $file AND reason = $reason)
