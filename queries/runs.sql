-- title: Runs
-- description: Every run with its status (run_status: run_end's, or completed once another
--   trainer's log marks the end of training), last step and timing, newest activity first.
SELECT
    r.run,
    s.status,
    r.first_seen,
    r.last_seen,
    m.lines,
    m.last_step,
    m.attempts,
    m.last_elapsed_s,
    (SELECT count(*) FROM ingest_errors e WHERE e.run = r.run) AS errors
FROM runs AS r
JOIN run_status AS s USING (run)
LEFT JOIN (
    SELECT run, count(*) AS lines, max(step) AS last_step, count(DISTINCT attempt) AS attempts,
           max(elapsed_s) AS last_elapsed_s
    FROM metrics_all
    GROUP BY run
) AS m USING (run)
ORDER BY r.last_seen DESC, r.run
