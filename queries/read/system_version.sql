-- title: System panel version of a run
-- description: Changes whenever the run's system.jsonl gets samples (a cache key of the Run
--   page's System panel, apart from the training lines' version: the sampler writes on
--   through a stall, when no training line comes): its files, lines consumed and bytes read.
--   All 0: the run has no system.jsonl, and no System panel.
-- param run: run id (example: 'seed-cliff')
SELECT count(*) AS files, coalesce(sum(lines), 0) AS lines, coalesce(sum("offset"), 0) AS bytes
FROM files
WHERE run = $run AND kind = 'system'
