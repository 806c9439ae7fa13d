-- title: Set many runs' status
-- description: The status the last run_start or run_end of each run's lines sets (running,
--   completed, failed or interrupted), for several runs in one statement (lists of equal
--   length, each run once).
-- param runs: run ids, each once (example: ['example/run'])
-- param statuses: each run's status (example: ['completed'])
INSERT INTO runs (run, first_seen, last_seen, status)
SELECT unnest($runs), current_localtimestamp(), current_localtimestamp(), unnest($statuses)
ON CONFLICT (run) DO UPDATE SET last_seen = current_localtimestamp(), status = excluded.status
