-- title: A stall's metric is gap_s, as the Run page calls it
-- description: The seconds between two lines had two names: `gap_s` on the Run page, in
--   time_gaps/stalls and in alert messages, `interval_s` in stored stall incidents and the
--   alert states keyed on them (`stall:interval_s@2027`). Issue 20, item 16 makes it one:
--   stored incidents, alert states, transitions and notifications are renamed, so an old
--   database shows `gap_s` and live diagnosis updates its stalls in place instead of storing
--   each again under the new name. Old rules files may still say `interval_s`
--   (app/alerts/fields.py reads it as gap_s).

UPDATE incidents SET metric = 'gap_s' WHERE metric = 'interval_s';

-- the alert states of the incident rules: `stall:interval_s@2027`, and the JSON detail that
-- quotes it (a summary written before messages said gap_s, "stall in interval_s")
UPDATE alert_states
SET metric = replace(metric, ':interval_s@', ':gap_s@'),
    detail = replace(detail, 'interval_s', 'gap_s')
WHERE metric LIKE 'stall:interval\_s@%' ESCAPE '\';

UPDATE alert_transitions SET metric = replace(metric, ':interval_s@', ':gap_s@')
WHERE metric LIKE 'stall:interval\_s@%' ESCAPE '\';

-- notifications keep their key (the Idempotency-Key already sent), only what they show
UPDATE notifications
SET metric = replace(metric, ':interval_s@', ':gap_s@'),
    facts = replace(facts, 'interval_s', 'gap_s')
WHERE metric LIKE 'stall:interval\_s@%' ESCAPE '\';
