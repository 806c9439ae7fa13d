-- title: Files of a run not read
-- description: The files of the named runs (NULL: every run) whose lines are not in the
--   database, and why, for `diagnose`: a file skipped (files.state `skipped`: another log of
--   the run repeats it, a checkpoint's copy, or no log), refused (`unreadable`, `outside`,
--   `not_regular`, `symlink_loop`), or kept but with no line read (a text file that is no log
--   yet, a file whose every line failed). `unread` is false only for a file skipped because
--   another log of its run carries the same rows (nothing of the run is missed), true
--   otherwise: diagnose exits 3 when one is true. The reason is the ingest_errors note that
--   says so (`not read: ...`, `not a log yet: ...`), else the file's first error.
-- param runs: run ids, or NULL for every run (example: ['seed-cliff'])
WITH noted AS (
    SELECT file, arg_max(reason, recorded_at) AS reason
    FROM ingest_errors
    WHERE severity = 'info' AND (reason LIKE 'not read: %' OR reason LIKE 'not a log yet%')
    GROUP BY file
), failed AS (
    SELECT file, arg_min(reason, "offset") AS reason
    FROM ingest_errors
    WHERE severity <> 'info'
    GROUP BY file
)
SELECT f.run, f.path AS file, f.state,
       coalesce(n.reason, e.reason, 'its state is ' || f.state) AS reason,
       -- a duplicate's or a checkpoint copy's reason never says 'not a ' (detect.py's
       -- "not a log: ...", hf_state's "not a Hugging Face trainer state" do)
       NOT (f.state = 'skipped' AND coalesce(n.reason, '') NOT LIKE '%not a %') AS unread
FROM files AS f
LEFT JOIN noted AS n ON n.file = f.path
LEFT JOIN failed AS e ON e.file = f.path
WHERE ($runs IS NULL OR list_contains($runs, f.run))
  AND (f.state NOT IN ('ok', 'deleted')
       OR (f.lines = 0 AND f.kind <> 'run_meta'
           AND (n.reason IS NOT NULL OR e.reason IS NOT NULL)))
ORDER BY f.run, f.path
