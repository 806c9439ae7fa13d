-- title: Touch many runs
-- description: ingest/run_touch for several runs in one statement.
-- param runs: run ids, each once (example: ['example/run'])
INSERT INTO runs (run, first_seen, last_seen, status)
SELECT unnest($runs), current_localtimestamp(), current_localtimestamp(), 'running'
ON CONFLICT (run) DO UPDATE SET last_seen = current_localtimestamp()
