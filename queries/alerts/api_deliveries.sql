-- title: Delivery attempts of recent notifications
-- description: Every attempt to send notifications from `since_id` on: outcome, HTTP status,
--   what went wrong (never the webhook's URL) and how long it took.
-- param since_id: smallest notification id wanted (example: 1)
SELECT notification_id, target, attempt, time, outcome, http_status, error, elapsed_ms
FROM deliveries
WHERE notification_id >= $since_id
ORDER BY id
