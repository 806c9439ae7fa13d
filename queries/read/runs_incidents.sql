-- title: Runs table incidents
-- description: How many incidents each run named has, and how many of them are open: an
--   incident is open while its episode reaches the run's newest line (end_step >= the step of
--   the newest line), the detector's own "open" (app/diagnose/rules.py Incident.open), one
--   that may still grow. Every incident is counted: a finished run's are closed, not none.
-- param runs: run ids (example: ['seed-cliff'])
-- param steps: the step of each run's newest line, in the same order (example: [4499])
WITH newest AS (
    SELECT unnest($runs) AS run, unnest($steps) AS last_step
)
SELECT n.run, count(i.run) AS incidents,
       count(i.run) FILTER (WHERE i.end_step >= n.last_step) AS open_incidents
FROM newest AS n
LEFT JOIN incidents AS i ON i.run = n.run
GROUP BY n.run
