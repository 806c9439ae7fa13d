-- title: Store alert states
-- description: The states a pass changed, one row per (rule, run, metric), inserted or
--   replaced; in the same transaction as their transitions and notifications.
-- chunk: alert_states
INSERT INTO alert_states BY NAME SELECT * FROM chunk
ON CONFLICT (rule, run, metric) DO UPDATE SET
    state = excluded.state, episode = excluded.episode, changed_time = excluded.changed_time,
    changed_step = excluded.changed_step, pending_time = excluded.pending_time,
    pending_lines = excluded.pending_lines, value = excluded.value,
    notified_time = excluded.notified_time, detail = excluded.detail, repeats = excluded.repeats
