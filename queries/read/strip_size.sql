-- title: Bucket strip size
-- description: How many logged lines with a `buckets` list a run has in steps lo..hi, and how
--   many micro-batches they hold: whether the strip can show one cell per micro-batch.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step, or NULL from the start (default: NULL) (example: 0)
-- param hi: last step, or NULL to the end (default: NULL) (example: 5000)
SELECT count(*) AS lines, coalesce(sum(len(buckets)), 0) AS cells
FROM metrics
WHERE run = $run AND buckets IS NOT NULL
  AND ($lo IS NULL OR step >= $lo) AND ($hi IS NULL OR step <= $hi)
