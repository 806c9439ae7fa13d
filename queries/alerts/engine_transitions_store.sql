-- title: Record alert transitions
-- description: Every change of state a pass made, with its time and step, in order.
-- chunk: alert_transitions
INSERT INTO alert_transitions (rule, run, metric, from_state, to_state, time, step, value)
SELECT rule, run, metric, from_state, to_state, time, step, value FROM chunk
