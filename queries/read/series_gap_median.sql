-- title: Typical interval from raw lines
-- description: The median seconds between a run's consecutive logged lines (every attempt).
-- param run: run id (example: 'seed-cliff')
SELECT median(gap_s) AS typical_s FROM line_gaps WHERE run = $run
