-- title: Files not read
-- description: Files found in the log directory but not read, and why (once per file): another
--   log of the same run is read (trainer_log.jsonl beside trainer_state.json), or the file
--   holds no log (no line with a step-like key).
SELECT f.path AS file, f.run, e.reason
FROM files AS f
JOIN ingest_errors AS e ON e.file = f.path AND e.severity = 'info'
    AND e.reason LIKE 'not read: %'
WHERE f.state = 'skipped'
ORDER BY f.path
LIMIT 100
