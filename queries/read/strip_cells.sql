-- title: Bucket strip cells
-- description: One cell per micro-batch of each logged line in steps lo..hi (the run's current
--   timeline): a line's `buckets` split the interval from the attempt's previous line to this
--   line evenly, in the x unit asked for. A first line with no line before it takes the width
--   of the interval after it.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step, or NULL from the start (default: NULL) (example: 0)
-- param hi: last step, or NULL to the end (default: NULL) (example: 5000)
-- param x: position unit, 'step', 'elapsed' or 'time' (default: 'step') (example: 'step')
-- param before: step of the line just before the range (read/strip_before), NULL for none (default: NULL) (example: 2000)
WITH lines AS (
    SELECT attempt, line_id, step, buckets,
           CASE coalesce($x, 'step') WHEN 'elapsed' THEN elapsed_s WHEN 'time' THEN "time"
                ELSE step END::DOUBLE AS pos
    FROM metrics
    WHERE run = $run AND step >= coalesce($before, $lo, -9223372036854775808)
      AND ($hi IS NULL OR step <= $hi)
), spans AS (
    SELECT *, lag(pos) OVER w AS prev, lead(pos) OVER w AS next
    FROM lines
    WINDOW w AS (PARTITION BY attempt ORDER BY line_id)
), kept AS (
    SELECT step, line_id, buckets, pos,
           coalesce(prev, 2 * pos - next,
                    pos - CASE WHEN coalesce($x, 'step') = 'step' THEN 1 ELSE 0 END) AS start
    FROM spans
    WHERE len(buckets) > 0 AND pos IS NOT NULL AND ($lo IS NULL OR step >= $lo)
)
SELECT start + (pos - start) * (u.i - 1) / len(buckets) AS x0,
       start + (pos - start) * u.i / len(buckets) AS x1,
       step, (u.i - 1)::INTEGER AS micro, u.b::INTEGER AS bucket, 1.0::DOUBLE AS share
FROM kept, UNNEST(buckets) WITH ORDINALITY AS u(b, i)
ORDER BY line_id, micro
