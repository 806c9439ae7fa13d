-- title: Queue a test notification for one target
-- description: One pending outbox row, due now.
-- param notification_id: notifications.id (example: 1)
-- param target: target id (example: 'log')
-- param now: Unix seconds (example: 0.0)
INSERT INTO outbox (notification_id, target, status, attempts, next_time)
VALUES ($notification_id, $target, 'pending', 0, $now)
ON CONFLICT DO NOTHING
