-- title: Bucket runs
-- description: Per logged line: how many micro-batches it covers, how many distinct length
--   buckets they came from, the share of the most common one (1.0 = homogeneous), and how
--   many consecutive micro-batches up to this line came from the same bucket.
-- param run: run id (example: 'seed-cliff')
WITH micro AS (
    SELECT l.line_id, l.step, u.i, u.bucket
    FROM (SELECT line_id, step, buckets FROM metrics_all
          WHERE run = $run AND buckets IS NOT NULL) AS l,
         LATERAL (SELECT generate_subscripts(l.buckets, 1) AS i, unnest(l.buckets) AS bucket) u
), flagged AS (
    SELECT *, CASE WHEN bucket = lag(bucket) OVER o THEN 0 ELSE 1 END AS starts
    FROM micro WINDOW o AS (ORDER BY line_id, i)
), islands AS (
    SELECT *, sum(starts) OVER (ORDER BY line_id, i) AS island FROM flagged
), runs AS (
    SELECT *, row_number() OVER (PARTITION BY island ORDER BY line_id, i) AS run_length
    FROM islands
)
SELECT
    step,
    count(*) AS micro_batches,
    count(DISTINCT bucket) AS buckets,
    max(n) / count(*) AS homogeneity,
    arg_max(bucket, (line_id, i)) AS last_bucket,
    arg_max(run_length, (line_id, i)) AS same_bucket_run
FROM (SELECT *, count(*) OVER (PARTITION BY line_id, bucket) AS n FROM runs)
GROUP BY line_id, step
ORDER BY line_id
