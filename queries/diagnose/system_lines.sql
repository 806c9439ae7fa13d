-- title: System evidence: the lines' times
-- description: The Unix time of one run's lines with ids from lo to hi: what a stall's
--   machine evidence (system.jsonl's samples) is matched on (app/diagnose/system.py).
-- param run: run id (example: 'seed-cliff')
-- param lo: first line id, -1 for the run's first (example: -1)
-- param hi: last line id (example: 1000000)
SELECT line_id, "time"
FROM metrics_all
WHERE run = $run AND line_id BETWEEN $lo AND $hi
ORDER BY line_id
