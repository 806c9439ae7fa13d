-- title: Alerts still firing that a webhook was told of
-- description: For re-sending to Alertmanager, which forgets an alert not sent again before
--   its endsAt: each state firing now whose firing (or a repeat) in this episode was sent to
--   this target, with the newest such message and when the state began firing. A state that
--   resolved, or whose firing still waits in the outbox, is not here: the lane sends those in
--   order itself.
-- param target: target id, `w` + 12 hex digits of the URL's hash (example: 'w000000000000')
-- param all_rules: true to re-send every rule's states (example: true)
-- param rules: otherwise only these rules, the ones still in the rules file (example: ['stall'])
SELECT n.metric, n.facts, s.changed_time AS fired_time, n.rule, n.run, n.kind, n.severity
FROM alert_states s
JOIN notifications n
  ON n.rule = s.rule AND n.run = s.run AND coalesce(n.metric, '') = s.metric
JOIN outbox o ON o.notification_id = n.id AND o.target = $target AND o.status = 'sent'
WHERE s.state = 'firing' AND n.kind IN ('firing', 'repeat') AND n.created_time >= s.changed_time
  AND ($all_rules OR list_contains($rules::VARCHAR[], s.rule))
QUALIFY row_number() OVER (PARTITION BY s.rule, s.run, s.metric ORDER BY n.id DESC) = 1
ORDER BY n.id
