-- title: Write notifications
-- description: The outbox heads of a pass's notifications. One whose key was already written
--   is left as it was (a restart never writes a notification twice); the rows written come
--   back, so only they get outbox rows.
-- chunk: notifications
INSERT INTO notifications (id, key, rule, run, metric, kind, severity, created_time, silenced,
                           facts)
SELECT id, key, rule, run, metric, kind, severity, created_time, silenced, facts FROM chunk
ON CONFLICT DO NOTHING
RETURNING id, silenced
