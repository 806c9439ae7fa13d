-- title: Write a test notification
-- description: `alerts test`: a notification of kind 'test' (its outbox rows are written in the
--   same transaction by api_test_outbox), sent to every target like any other.
-- param key: a fresh Idempotency-Key (example: 'test-example')
-- param created_time: Unix seconds now (example: 0.0)
-- param facts: what the message says, JSON (example: '{"kind": "test"}')
INSERT INTO notifications (key, rule, run, metric, kind, severity, created_time, facts)
VALUES ($key, 'test', NULL, NULL, 'test', 'info', $created_time, $facts)
RETURNING id
