-- title: Runs' diagnosis state
-- description: The detector state stored for the given runs (those a restarted server meets
--   first with new lines, events or rank lines), found by their key.
-- param runs: run names (example: ['seed-cliff'])
SELECT run, state
FROM diagnosis_state
WHERE run IN (SELECT unnest($runs))
