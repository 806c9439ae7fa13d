-- title: Set a run's status
-- description: From run_start / run_end events (the last of a batch): creates the run if this
--   is its first ingested line, else sets its status and moves its last_seen.
-- param run: run id (example: 'example/run')
-- param status: running, completed, failed or interrupted (example: 'running')
INSERT INTO runs (run, first_seen, last_seen, status)
VALUES ($run, current_localtimestamp(), current_localtimestamp(), $status)
ON CONFLICT (run) DO UPDATE SET last_seen = current_localtimestamp(), status = $status
