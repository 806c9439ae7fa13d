-- title: Prometheus: open incidents
-- description: How many incidents of each kind are open per run named: open while the episode
--   reaches the run's newest line (end_step >= that line's step), as read/runs_incidents
--   counts them for the Runs page.
-- param runs: run ids (example: ['seed-cliff'])
-- param steps: the step of each run's newest line, in the same order (example: [4499])
WITH newest AS (
    SELECT unnest($runs) AS run, unnest($steps) AS last_step
)
SELECT i.run, i.kind, count(*) AS open
FROM newest AS n
JOIN incidents AS i ON i.run = n.run AND i.end_step >= n.last_step
GROUP BY i.run, i.kind
ORDER BY i.run, i.kind
