-- title: Incidents' worst point
-- description: Where an incident was worst: `value` becomes the episode's worst value (the
--   top of a spike, the bottom of a cliff) and `worst_step` the step it was logged at, so
--   the page and the alerts can quote the peak and not the episode's first line. Incidents
--   stored before hold the value at `step`, so that is their worst step.

ALTER TABLE incidents ADD COLUMN worst_step BIGINT;
UPDATE incidents SET worst_step = step;
