-- title: Runs' last lines
-- description: The newest line id and step of each run named (where judging starts for a run
--   that was already history when the rules met it), for all of them in one scan. A run with no
--   metric line is left out.
-- param runs: run ids (example: ['seed-cliff'])
SELECT run, max(line_id) AS last_line, max(step) AS last_step
FROM metrics_all
WHERE run IN (SELECT unnest($runs))
GROUP BY run
