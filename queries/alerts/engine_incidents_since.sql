-- title: Incidents changed since
-- description: Incidents found or grown by live diagnosis after a given update time (all of
--   them when NULL), oldest change first, for the incident rules. `value` is the episode's
--   worst value (top of a spike, bottom of a cliff) and `worst_step` the step it was logged
--   at; `step` is the episode's first line.
-- param since: updated_at already read, or NULL for all (example: NULL)
SELECT run, kind, metric, step, end_step, worst_step, value, baseline, causes, evidence,
       updated_at
FROM incidents
WHERE $since IS NULL OR updated_at > $since
ORDER BY updated_at, run, step
