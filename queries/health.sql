-- title: Health
-- description: What the monitor holds: runs, metric rows, tracked files, recorded ingest errors,
--   and files found but not read (another log of the run is read, or they hold no log).
SELECT
    (SELECT count(*) FROM runs) AS runs,
    (SELECT count(*) FROM metric_rows) AS rows,
    (SELECT count(*) FROM files WHERE state <> 'deleted') AS files,
    (SELECT count(*) FROM ingest_errors) AS errors,
    (SELECT count(*) FROM files WHERE state = 'skipped') AS skipped_files
