-- title: Run attempts' reasons
-- description: Why each attempt of one run began: `reason` holds every sign of a restart
--   seen, joined by '+' (step_back, clock_back, epoch_reset, resume_event, file_truncated,
--   file_replaced; start for the first); what the resume cause quotes.
-- param run: run id (example: 'seed-cliff')
SELECT attempt, start_step, prev_step, reason
FROM attempts
WHERE run = $run
ORDER BY attempt
