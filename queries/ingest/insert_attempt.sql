-- title: Insert one attempt
-- description: The attempt a fast-path chunk begins (bound values: no Arrow table, so a
--   catch-up never imports pandas through pyarrow).
-- param run: run name (example: 'demo')
-- param attempt: attempt number (example: 1)
-- param start_step: its first step (example: 0)
-- param prev_step: the step before it, NULL at the start (example: NULL)
-- param reason: start, step_back or a reset reason (example: 'start')
-- param file_id: file id (example: 1)
INSERT INTO attempts (run, attempt, start_step, prev_step, reason, file_id)
VALUES ($run, $attempt, $start_step, $prev_step, $reason, $file_id)
