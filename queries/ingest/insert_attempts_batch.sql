-- title: Insert the first attempt of many files
-- description: The attempt each file of a batched insert begins (lists of equal length, one
--   entry per file; bound values, no Arrow table).
-- param runs: run names (example: ['demo'])
-- param attempts: attempt numbers (example: [1])
-- param start_steps: first steps (example: [0])
-- param reasons: start, or a reset reason (example: ['start'])
-- param file_ids: file ids (example: [1])
INSERT INTO attempts (run, attempt, start_step, prev_step, reason, file_id)
SELECT unnest($runs), unnest($attempts), unnest($start_steps), NULL, unnest($reasons),
       unnest($file_ids)
