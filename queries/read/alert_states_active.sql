-- title: Alert states in force
-- description: The (rule, run) pairs whose alert is pending or firing, for the runs named:
--   the Runs page's alert column (a silence in force may still mute them).
-- param runs: run ids (example: ['seed-cliff'])
SELECT run, rule, state
FROM alert_states
WHERE state IN ('pending', 'firing') AND list_contains($runs, run)
ORDER BY run, rule
