-- title: Move an outbox row on
-- description: After an attempt: still pending with a later next_time (backoff, Retry-After),
--   or done (sent, failed, expired) with done_time. Only a pending row changes, so a row marked
--   sent is never sent again.
-- param notification_id: notifications.id (example: 1)
-- param target: target id (example: 'log')
-- param status: pending, sent, failed or expired (example: 'sent')
-- param attempts: attempts made so far (example: 1)
-- param next_time: Unix seconds before which it is not tried again (example: 0.0)
-- param done_time: Unix seconds it was sent, failed or expired, or NULL (example: NULL)
UPDATE outbox SET status = $status, attempts = $attempts, next_time = $next_time,
                  done_time = $done_time
WHERE notification_id = $notification_id AND target = $target AND status = 'pending'
