-- title: A run's last line
-- description: The newest line id and step of a run (where judging starts for a run that was
--   already history when the rules met it).
-- param run: run id (example: 'seed-cliff')
SELECT coalesce(max(line_id), -1) AS last_line, max(step) AS last_step
FROM metrics_all
WHERE run = $run
