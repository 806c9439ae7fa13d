-- title: Recent notifications
-- description: The newest notifications, newest first, with what they say (`facts`, JSON).
--   Silenced ones are kept but never sent.
-- param limit: how many (example: 50)
SELECT id, key, rule, run, metric, kind, severity, created_time, silenced, facts
FROM notifications
ORDER BY id DESC
LIMIT $limit
