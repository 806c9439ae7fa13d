-- title: Health
-- description: What the monitor holds: runs, metric rows, tracked files and recorded ingest errors.
SELECT
    (SELECT count(*) FROM runs) AS runs,
    (SELECT count(*) FROM metric_rows) AS rows,
    (SELECT count(*) FROM files WHERE state <> 'deleted') AS files,
    (SELECT count(*) FROM ingest_errors) AS errors
