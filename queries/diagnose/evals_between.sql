-- title: Run evaluations between steps
-- description: One run's evaluation rows (table evals, kind 'eval': a validation pass) logged
--   at steps from lo to hi, in the order read: an evaluation at the step of a stall explains
--   it (app/diagnose/causes.py). Every column, so that the evidence can quote the values.
-- param run: run id (example: 'nanogpt-tinystories')
-- param lo: first step (example: 0)
-- param hi: last step (example: 1000000)
SELECT *
FROM evals
WHERE run = $run AND kind = 'eval' AND step BETWEEN $lo AND $hi
ORDER BY line_id
