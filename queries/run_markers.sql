-- title: Run markers
-- description: Steps to mark on a run's charts: checkpoints, epoch starts, resumes and the
--   first step of each incident, with a label.
-- param run: run id (example: 'seed-cliff')
SELECT step, 'checkpoint' AS marker,
       'checkpoint, loop blocked '
       || coalesce(round(TRY_CAST(data->>'blocked_s' AS DOUBLE), 1)::VARCHAR, '?') || ' s'
       AS label
FROM events WHERE run = $run AND kind = 'checkpoint_end'
UNION ALL
SELECT step, 'epoch', 'epoch ' || coalesce(data->>'epoch', '?') || ' starts'
FROM events WHERE run = $run AND kind = 'epoch_start'
UNION ALL
SELECT start_step, 'resume', 'attempt ' || attempt || ' (' || reason || ')'
FROM attempts WHERE run = $run AND attempt > 1
UNION ALL
SELECT step, 'incident', kind || ' in ' || metric || ': ' || array_to_string(causes, ', ')
FROM incidents WHERE run = $run
ORDER BY step
