-- title: Queue notifications for webhooks
-- description: One outbox row per (notification, target), pending and due at once.
-- chunk: outbox
INSERT INTO outbox (notification_id, target, status, attempts, next_time)
SELECT notification_id, target, status, attempts, next_time FROM chunk
ON CONFLICT DO NOTHING
