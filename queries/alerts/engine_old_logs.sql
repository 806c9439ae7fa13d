-- title: Runs whose logs say they are old
-- description: Of the runs named (met by the alert rules for the first time), those from
--   other trainers (run_status.other_trainer) whose log was written before the monitor
--   watched it, whatever its file's modification time: the log marks the end of training
--   (log_ended); or its newest line's own wall clock (`time`) is before `before`; or, for a
--   log with no wall clock (llm.c's main.log, trainer_state.json, LLaMA-Factory's elapsed
--   time only), it already held `whole_lines` lines or more when first met: it appeared
--   whole (a copy, or history found at start-up), while a live run is met a pass or two after
--   its first line. A log copied or unpacked into the log directory gets a fresh modification
--   time, so files.grew_at calls it new; such a run is history (app/alerts/engine.py), judged
--   only from its next line. Each run's lines are read once, at that first meeting.
-- param runs: run ids met for the first time (example: ['seed-cliff'])
-- param before: Unix seconds: a newest line older than this is history (example: 1700000000.0)
-- param whole_lines: lines of a log with no wall clock that make it history (example: 200)
WITH stored AS (
    SELECT run, sum(lines) AS lines
    FROM line_files
    WHERE list_contains($runs, run)
    GROUP BY run
)
SELECT s.run
FROM run_status AS s
JOIN stored AS l USING (run)
WHERE s.other_trainer
  AND (s.log_ended
       OR coalesce((SELECT max(m."time") FROM metrics_all AS m WHERE m.run = s.run) < $before,
                   l.lines >= $whole_lines))
ORDER BY s.run
