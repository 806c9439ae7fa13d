-- title: Where a notification stands per target
-- description: Status and the last attempt's outcome for each target of one notification, and
--   how many earlier notifications still wait before it (messages go out in order).
-- param notification_id: notifications.id (example: 1)
SELECT o.target, o.status, o.attempts, d.outcome, d.http_status, d.error, d.elapsed_ms,
       (SELECT count(*) FROM outbox e
        WHERE e.target = o.target AND e.status = 'pending'
          AND e.notification_id < o.notification_id) AS waiting_before
FROM outbox o
LEFT JOIN (
    SELECT * FROM deliveries WHERE notification_id = $notification_id
    QUALIFY row_number() OVER (PARTITION BY target ORDER BY attempt DESC) = 1
) d ON d.target = o.target
WHERE o.notification_id = $notification_id
ORDER BY o.target
