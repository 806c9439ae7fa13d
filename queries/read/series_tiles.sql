-- title: Chart series from tiles
-- description: A run's tiles that lie wholly in steps [lo, hi] as chart buckets per metric
--   and attempt (the same columns as series_raw); a tile counts in the bucket where it starts.
-- param run: run id (example: 'seed-cliff')
-- param metrics: metric names as stored in tiles (example: ['loss', '~gap_s'])
-- param lo: first step, NULL for open (example: NULL)
-- param hi: last step, NULL for open (example: NULL)
-- param x: step, elapsed or time (example: 'step')
-- param attempts: per attempt bucketed: its number (example: [1])
-- param x0s: where its first bucket starts on x (example: [0.0])
-- param widths: bucket width on x (example: [1.0])
-- param buckets: number of buckets (example: [10])
WITH tiles AS (
    SELECT *, CASE $x WHEN 'step' THEN first_step::DOUBLE WHEN 'elapsed' THEN first_elapsed ELSE first_time END AS x_logged,
        -- inf and NaN are no place on an axis: such a line has no x
        CASE WHEN isfinite(x_logged) THEN x_logged END AS x,
        list_position($attempts, attempt) AS i
    FROM chart_tiles
    WHERE file_id IN (SELECT file_id FROM line_files WHERE run = $run)
        AND first_step >= coalesce($lo, first_step) AND last_step <= coalesce($hi, last_step)
), placed AS (  -- list_position, not a join on the layout: cheaper
    SELECT *, greatest(0, least($buckets[i] - 1, floor((x - $x0s[i]) / $widths[i])))::BIGINT AS bucket
    FROM tiles
    WHERE x IS NOT NULL AND i IS NOT NULL
)
SELECT v.metric, t.attempt, t.bucket, min(t.x) AS x,
       min(t.first_step) AS step, sum(v.n)::BIGINT AS n, sum(v.nonfinite)::BIGINT AS nonfinite,
       min(v.lo) AS lo, max(v.hi) AS hi, arg_min(v.lo_step, v.lo) AS lo_step,
       arg_max(v.hi_step, v.hi) AS hi_step, sum(v.sum) AS sum, NULL::DOUBLE AS raw
FROM placed AS t
JOIN chart_tile_values AS v USING (file_id, tile, attempt)
WHERE list_contains($metrics, v.metric)
GROUP BY v.metric, t.attempt, t.bucket
