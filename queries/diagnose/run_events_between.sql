-- title: Run events between steps
-- description: One run's events logged at steps from lo to hi, in the order written: what
--   live cause attribution reads for one incident's window (not the whole run's events).
-- param run: run id (example: 'seed-cliff')
-- param lo: first step (example: 1990)
-- param hi: last step (example: 2030)
SELECT kind, step, elapsed_s, "time", data
FROM events
WHERE run = $run AND step BETWEEN $lo AND $hi
ORDER BY file_id, "offset"
