-- title: Touch a run
-- description: Creates the run on its first ingested line, else moves its last_seen.
-- param run: run id (example: 'example/run')
INSERT INTO runs (run, first_seen, last_seen, status)
VALUES ($run, current_localtimestamp(), current_localtimestamp(), 'running')
ON CONFLICT (run) DO UPDATE SET last_seen = current_localtimestamp()
