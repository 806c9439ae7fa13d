-- title: Next notification for a webhook
-- description: The oldest pending outbox row of one target with its notification (messages go
--   out in order per webhook: later ones wait until this one is sent, failed or expired).
-- param target: target id, `w` + 12 hex digits of the URL's hash, or 'log' (example: 'log')
SELECT o.notification_id, o.attempts, o.next_time, n.key, n.created_time, n.rule, n.run,
       n.metric, n.kind, n.severity, n.facts
FROM outbox o
JOIN notifications n ON n.id = o.notification_id
WHERE o.target = $target AND o.status = 'pending'
ORDER BY o.notification_id
LIMIT 1
