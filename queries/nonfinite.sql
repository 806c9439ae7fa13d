-- title: Non-finite values
-- description: Every NaN or infinite metric value, by run, step and metric.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
SELECT run, attempt, step, metric, value
FROM (
    UNPIVOT (
        SELECT line_id, run, attempt, step, COLUMNS(lambda c: c NOT IN (
            'run', 'line_id', 'attempt', 'step', 'elapsed_s', 'time', 'epoch', 'buckets', 'file_id',
            'ingested_at'))
        FROM metrics_all
        WHERE $run IS NULL OR run = $run
    )
    ON COLUMNS(* EXCLUDE (line_id, run, attempt, step))
    INTO NAME metric VALUE value
)
WHERE NOT isfinite(value)
ORDER BY run, line_id, metric
