-- title: Prometheus: the monitor itself
-- description: Counts GET /metrics reports about the monitor: runs, metric rows and files
--   stored, files watched (tracked and not deleted) and skipped, ingest errors by severity,
--   notifications waiting in the outbox and those given up (failed or expired), and alert
--   states pending or firing. One aggregate per table, joined as one row (eleven scalar
--   subqueries took DuckDB 80 ms where these take 2 ms); metric rows are counted from the
--   table's metadata, no scan.
SELECT *
FROM (SELECT count(*) AS runs FROM runs),
    (SELECT count(*) AS metric_rows FROM metric_rows),
    (SELECT count(*) FILTER (WHERE state <> 'deleted') AS files_watched,
            count(*) FILTER (WHERE state = 'skipped') AS files_skipped
     FROM files),
    (SELECT count(*) FILTER (WHERE severity = 'error') AS ingest_errors,
            count(*) FILTER (WHERE severity <> 'error') AS ingest_warnings
     FROM ingest_errors),
    (SELECT count(*) FILTER (WHERE status = 'pending') AS outbox_pending,
            count(*) FILTER (WHERE status = 'failed') AS outbox_failed,
            count(*) FILTER (WHERE status = 'expired') AS outbox_expired
     FROM outbox),
    (SELECT count(*) FILTER (WHERE state = 'pending') AS alerts_pending,
            count(*) FILTER (WHERE state = 'firing') AS alerts_firing
     FROM alert_states)
