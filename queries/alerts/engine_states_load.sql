-- title: Alert states
-- description: Every (rule, run, metric) state the rules have recorded, loaded at start so a
--   restart forgets nothing that was pending or firing.
SELECT rule, run, metric, state, episode, changed_time, changed_step, pending_time,
       pending_lines, value, notified_time, detail, repeats
FROM alert_states
