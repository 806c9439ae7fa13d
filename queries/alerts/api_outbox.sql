-- title: Outbox rows of recent notifications
-- description: Where each notification stands per target (pending, sent, failed, expired),
--   for notifications from `since_id` on.
-- param since_id: smallest notification id wanted (example: 1)
SELECT notification_id, target, status, attempts, next_time, done_time
FROM outbox
WHERE notification_id >= $since_id
ORDER BY notification_id, target
