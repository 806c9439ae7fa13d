-- title: Run context
-- description: Per logged line of one run: its attempt, epoch, time, the length bucket of each
--   micro-batch consumed since the previous line, and every learning-rate column (those whose
--   lower-cased name matches one of the `schedule` globs: lr, learning_rate, lr-Adam, ...);
--   what whole-run cause attribution reads (app/diagnose/causes.py, schedule.py).
-- param run: run id (example: 'seed-cliff')
-- param schedule: globs of learning-rate column names (example: ['lr', '*learning_rate*'])
SELECT COLUMNS(lambda c: c IN ('line_id', 'step', 'attempt', 'epoch', 'time', 'buckets')
               OR len(list_filter($schedule, lambda g: lower(c) GLOB g)) > 0)
FROM metrics_all
WHERE run = $run
ORDER BY line_id
