-- title: Finished runs
-- description: Runs whose log says they ended (run_end: completed, failed or interrupted).
--   Ingest does not look at their files every tick, only when a file event names them or
--   the slow sweep (scan_interval) comes round.
SELECT run
FROM runs
WHERE coalesce(status, 'running') <> 'running'
