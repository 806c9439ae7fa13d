-- title: Bucket strip, merged
-- description: The bucket strip of steps lo..hi when it holds more micro-batches than cells
--   can be drawn: the range is cut into `groups` equal step ranges, each one cell whose
--   bucket is the most common among its micro-batches and share that bucket's fraction. Only
--   every `every`-th logged line is read (line_id modulo), so a range of millions of lines
--   costs a bounded read; the cell ends where the next one starts.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step, or NULL from the start (default: NULL) (example: 0)
-- param hi: last step, or NULL to the end (default: NULL) (example: 5000)
-- param x: position unit, 'step', 'elapsed' or 'time' (default: 'step') (example: 'step')
-- param groups: how many cells at most (example: 100)
-- param every: read one line in this many (example: 1)
WITH lines AS (
    SELECT line_id, step, buckets,
           CASE coalesce($x, 'step') WHEN 'elapsed' THEN elapsed_s WHEN 'time' THEN "time"
                ELSE step END::DOUBLE AS pos
    FROM metrics
    WHERE run = $run AND len(buckets) > 0 AND line_id % $every = 0
      AND ($lo IS NULL OR step >= $lo) AND ($hi IS NULL OR step <= $hi)
), span AS (
    SELECT min(step) AS s0, max(step) AS s1 FROM lines
), grouped AS (
    SELECT floor((l.step - s.s0) * $groups / (s.s1 - s.s0 + 1))::BIGINT AS grp, l.*
    FROM lines AS l, span AS s
    WHERE l.pos IS NOT NULL
), extents AS (
    SELECT grp, min(pos) AS x0, max(pos) AS last_pos, min(step) AS step
    FROM grouped
    GROUP BY grp
), counts AS (
    SELECT grp, u.b AS bucket, count(*) AS n
    FROM grouped, UNNEST(buckets) AS u(b)
    GROUP BY grp, u.b
), modes AS (
    SELECT grp, arg_max(bucket, n) AS bucket, max(n) / sum(n) AS share
    FROM counts
    GROUP BY grp
)
SELECT e.x0, coalesce(lead(e.x0) OVER (ORDER BY e.grp), e.last_pos) AS x1, e.step,
       0 AS micro, m.bucket::INTEGER AS bucket, m.share::DOUBLE AS share
FROM extents AS e
JOIN modes AS m USING (grp)
ORDER BY e.grp
