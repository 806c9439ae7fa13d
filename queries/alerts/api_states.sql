-- title: Alert states
-- description: Every (rule, run, metric) the rules have judged, with its current state
--   (inactive, pending, firing, resolved) and when and at which step it last changed.
SELECT rule, run, metric, state, episode, changed_time, changed_step, pending_time,
       pending_lines, value, notified_time, detail
FROM alert_states
ORDER BY rule, run, metric
