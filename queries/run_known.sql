-- title: Run known
-- description: Whether a run id exists and, for the answer to a name that does not, how many
--   runs there are and up to 10 of them, newest activity first (a query naming a run that is
--   not there says which runs are, instead of an empty result).
-- param run: run id (example: 'seed-cliff')
SELECT
    EXISTS (SELECT 1 FROM runs WHERE run = $run) AS known,
    (SELECT count(*) FROM runs) AS total,
    (SELECT list(run ORDER BY last_seen DESC NULLS LAST, run)
     FROM (SELECT run, last_seen FROM runs ORDER BY last_seen DESC NULLS LAST, run LIMIT 10))
        AS newest
