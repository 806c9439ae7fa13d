-- title: Runs whose logs say they are old
-- description: Of the runs named (met by the alert rules for the first time), those from
--   other trainers (run_status.other_trainer) whose log content says it was written long ago,
--   whatever its file's modification time: the log marks the end of training (log_ended), or
--   its newest line's own wall clock (`time`) is before `before`. A log copied or unpacked
--   into the log directory gets a fresh modification time, so files.grew_at calls it new;
--   such a run is history (app/alerts/engine.py), judged only from its next line. Each run's
--   lines are read once, at that first meeting.
-- param runs: run ids met for the first time (example: ['seed-cliff'])
-- param before: Unix seconds: a newest line older than this is history (example: 1700000000.0)
SELECT s.run
FROM run_status AS s
WHERE list_contains($runs, s.run) AND s.other_trainer
  AND (s.log_ended
       OR (SELECT max(m."time") FROM metrics_all AS m WHERE m.run = s.run) < $before)
ORDER BY s.run
