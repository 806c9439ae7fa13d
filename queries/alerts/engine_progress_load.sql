-- title: Alert progress
-- description: How far the rules have judged each run, and when they first met it.
SELECT run, last_line, first_time, history_step
FROM alert_progress
