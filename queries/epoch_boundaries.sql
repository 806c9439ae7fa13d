-- title: Epoch boundaries
-- description: Where each epoch began: epoch_start events, else the `epoch` field changing
--   (a fractional epoch, as Hugging Face logs it, crossing an integer counts).
-- param run: run id, or NULL for every run (example: 'seed-cliff')
WITH explicit AS (
    SELECT run, step, TRY_CAST(data->>'epoch' AS DOUBLE) AS epoch, 'event' AS source
    FROM events
    WHERE kind = 'epoch_start' AND ($run IS NULL OR run = $run)
), fields AS (
    SELECT run, step, epoch,
           floor(lag(epoch) OVER (PARTITION BY run ORDER BY line_id)) AS previous
    FROM metrics_all
    WHERE ($run IS NULL OR run = $run) AND epoch IS NOT NULL
), inferred AS (
    SELECT run, step, floor(epoch) AS epoch, 'epoch field' AS source
    FROM fields
    WHERE floor(epoch) > previous
      AND run NOT IN (SELECT run FROM explicit)
)
SELECT * FROM explicit
UNION ALL
SELECT * FROM inferred
ORDER BY run, step
