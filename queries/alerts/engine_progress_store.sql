-- title: Store alert progress
-- description: How far the rules have judged each run; written in the same transaction as
--   the state changes those lines caused, so a restart neither judges a line twice nor skips
--   one. first_time and history_step are kept from the first meeting.
-- chunk: alert_progress
INSERT INTO alert_progress BY NAME SELECT * FROM chunk
ON CONFLICT (run) DO UPDATE SET last_line = excluded.last_line, seen = excluded.seen
