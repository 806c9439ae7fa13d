-- title: Rank lines
-- description: Lines of the rank files (rank{N}.jsonl, table ranks_all) stored after rowid
--   `after` (and up to `upto`), of one run or of every run, in the order they were stored:
--   what straggler detection reads (app/diagnose/straggler.py), live (every run's new lines,
--   on a tick that stored some) and on demand (one run whole). `clock` is elapsed_s where
--   logged, else the Unix time (as line_gaps); `data_wait_s` is NULL where no rank file logs
--   it.
-- param run: run id, or NULL for every run (example: 'restarts')
-- param after: the highest rowid already read, -1 for none (example: -1)
-- param upto: the highest rowid to read, NULL for all (default: NULL) (example: NULL)
SELECT run, rank, attempt, step, line_clock(elapsed_s, "time") AS clock, data_wait_s, line_id
FROM (
    SELECT rowid AS line_id, * FROM ranks_all
    WHERE ($run IS NULL OR run = $run) AND rowid > $after
      AND rowid <= coalesce($upto, 9223372036854775807)
    UNION ALL BY NAME
    -- the column exists only once a rank file has logged it
    SELECT NULL::DOUBLE AS data_wait_s WHERE false
)
ORDER BY line_id
