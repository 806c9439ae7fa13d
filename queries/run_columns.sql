-- title: Run columns
-- description: For one run, how many lines carry each column (0 for a metric only other runs
--   log); what the dashboard offers to chart.
-- param run: run id (example: 'seed-cliff')
SELECT count(COLUMNS(*)) FROM metrics WHERE run = $run
