-- title: When the alert rules first met each run
-- description: For the Runs page's state (app/read/runs.py): `first_time` (Unix seconds)
--   when the rules first met the run, and `history_step`, not NULL when its log was written
--   before cliffwatch watched it (app/alerts/engine.py, Engine._history). A run past its stall
--   budget that has written nothing since then is "stopped" (finished or stopped before
--   cliffwatch started), not "stalled" (app/alerts/stall.py, before_watch). A run the rules
--   have not met yet has no row.
-- param runs: run ids (example: ['seed-cliff'])
SELECT run, first_time, history_step
FROM alert_progress
WHERE list_contains($runs, run)
