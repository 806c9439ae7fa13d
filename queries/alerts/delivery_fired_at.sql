-- title: When an alert began firing
-- description: The time an alert state last entered `firing` at or before a notification was
--   written: Alertmanager's `startsAt` for its firing, repeat and resolved messages alike.
-- param rule: rule name (example: 'nan-loss')
-- param run: run name (example: 'demo')
-- param metric: the state's metric, '' for a stall (example: 'loss')
-- param before: Unix seconds the notification was written (example: 1e12)
SELECT max(time) AS fired_time
FROM alert_transitions
WHERE rule = $rule AND run = $run AND metric = $metric AND to_state = 'firing'
  AND time <= $before
