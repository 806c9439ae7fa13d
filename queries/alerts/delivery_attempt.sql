-- title: Record a delivery attempt
-- description: One row per request to a webhook (or line to the log), whatever came of it.
--   `error` holds what went wrong, or the body a webhook answered a 4xx with; never the URL.
-- param notification_id: notifications.id (example: 1)
-- param target: target id (example: 'log')
-- param attempt: 1 for the first attempt (example: 1)
-- param time: Unix seconds the attempt started (example: 0.0)
-- param outcome: sent, retry, failed or expired (example: 'sent')
-- param http_status: the webhook's HTTP status, or NULL (example: NULL)
-- param error: what went wrong, or NULL (example: NULL)
-- param elapsed_ms: milliseconds the request took (example: 0.0)
INSERT INTO deliveries (notification_id, target, attempt, time, outcome, http_status, error,
                        elapsed_ms)
VALUES ($notification_id, $target, $attempt, $time, $outcome, $http_status, $error, $elapsed_ms)
