-- title: Runs stats
-- description: /api/runs's figures for the runs named (one page of them): metric lines
--   stored (every attempt), the highest step, attempts, the highest elapsed_s, and ingest
--   errors and warnings recorded (not the notes of severity info). Only the named runs'
--   line files are read (a join on their file ids, whose range DuckDB pushes into the
--   scan), never every run's lines.
-- param runs: run ids (example: ['seed-cliff'])
WITH named AS (
    SELECT unnest($runs) AS run
), page_files AS (
    SELECT f.run, f.file_id
    FROM line_files AS f
    JOIN named USING (run)
), lines AS (
    SELECT p.run, count(*) AS lines, max(m.step) AS last_step,
           max(m.elapsed_s) AS last_elapsed_s
    FROM (
        SELECT * FROM metric_rows
        UNION ALL BY NAME  -- elapsed_s only once a log has it
        SELECT NULL::DOUBLE AS elapsed_s WHERE false
    ) AS m
    JOIN page_files AS p USING (file_id)
    GROUP BY p.run
), tried AS (
    SELECT a.run, count(*) AS attempts
    FROM attempts AS a
    JOIN named USING (run)
    GROUP BY a.run
), failed AS (
    SELECT e.run, count(*) AS errors
    FROM ingest_errors AS e
    JOIN named USING (run)
    WHERE e.severity <> 'info'  -- a note such as "keys not read: total_steps" is no error
    GROUP BY e.run
)
SELECT n.run, l.lines, l.last_step, t.attempts, l.last_elapsed_s, coalesce(e.errors, 0) AS errors
FROM named AS n
LEFT JOIN lines AS l USING (run)
LEFT JOIN tried AS t USING (run)
LEFT JOIN failed AS e USING (run)
