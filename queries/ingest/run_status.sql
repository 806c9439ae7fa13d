-- title: Set a run's status
-- description: From run_start / run_end events.
-- param run: run id (example: 'example/run')
-- param status: running, completed, failed or interrupted (example: 'running')
UPDATE runs SET status = $status WHERE run = $run
