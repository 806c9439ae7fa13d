-- title: How many rank lines a run has
-- description: A run of torchrun ranks' files alone (rank{N}.jsonl, no metrics.jsonl) has no
--   metric line, but its ranks' step times were read and judged for stragglers: `diagnose`
--   counts them so that it does not say nothing of the run was read.
-- param run: run id (example: 'ddp')
SELECT count(*) AS lines
FROM ranks_all
WHERE run = $run
