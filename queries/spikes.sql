-- title: Spikes
-- description: Lines where a loss-like metric jumps far above the median of its previous
--   `window` lines: at least `ratio` times it and `sigmas` noise scales above it (the noise
--   scale is the larger of the median line-to-line change and the interquartile range over
--   the same lines, each as a standard deviation, and at least `floor` times the median),
--   with at least `sudden` of the excess arriving in one line, so a warm-up ramp is not a
--   spike. It must also rise `margin` times as far as the `rank`-th largest such sudden rise
--   of the previous `history` lines: a heavy-tailed metric (a gradient norm) that often jumps
--   by this much is showing its usual texture, not an incident. Nothing is judged before
--   `min_lines` values are there. The defaults are the live detector's rules
--   (app/diagnose/detect.py, SQL_PARAMS), which also follows how long each spike lasts; a
--   spike lists every line above its threshold. What differs: the detector leaves the lines
--   of each spike it found out of the rises later lines are measured against, judging the
--   lines one after another, and this query measures against every sudden rise, so a spike
--   repeated within `history` lines after one that rose over two lines (or after two
--   others) may be listed by `python -m app diagnose` and not here. The detector also reports
--   a gradient norm's spikes within 20 lines of each other as one, a warning, and none that
--   starts inside a loss spike; for a gradient norm it asks `ratio` 5.0 (heavy-tailed: a 2x
--   bump is routine; SQL_PARAMS["grad_norm_spikes"]), so pass ratio=5 for its twin.
-- param run: run id (example: 'seed-cliff')
-- param metric: column name (example: 'loss')
-- param ratio: value / baseline (default: 2.0) (example: 2.0)
-- param sigmas: noise scales above the baseline (default: 8.0) (example: 8.0)
-- param window: lines in the rolling baseline (default: 20) (example: 20)
-- param min_lines: values needed in the window before a line is judged (default: 15) (example: 15)
-- param floor: least noise scale, a fraction of the baseline (default: 0.01) (example: 0.01)
-- param sudden: least fraction of the excess arriving in one line (default: 0.5) (example: 0.5)
-- param history: earlier lines whose sudden rises set the bar (default: 5000) (example: 5000)
-- param rank: which of those rises, the largest first, is the bar (default: 2) (example: 2)
-- param margin: how many times the bar a spike must rise (default: 3.0) (example: 3.0)
WITH m AS (
    SELECT line_id, step, COLUMNS(lambda c: c = $metric) AS value
    FROM metrics_all
    WHERE run = $run
), d AS (
    SELECT *, v - lag(v) OVER (ORDER BY line_id) AS change
    FROM (SELECT *, CASE WHEN isfinite(value) THEN value END AS v FROM m)
), b AS (
    SELECT *,
        CASE WHEN count(v) OVER w >= coalesce($min_lines, 15) THEN median(v) OVER w END
            AS baseline,
        CASE WHEN count(change) OVER w >= coalesce($min_lines, 15)
             THEN median(abs(change)) OVER w END AS jump,
        (quantile_cont(v, 0.75) OVER w - quantile_cont(v, 0.25) OVER w) / 1.349 AS spread
    FROM d
    WINDOW w AS (ORDER BY line_id
                 ROWS BETWEEN coalesce($window, 20) PRECEDING AND 1 PRECEDING)
), e AS (
    SELECT *, v - baseline AS excess,
           CASE WHEN v - baseline > 0 AND change > coalesce($sudden, 0.5) * (v - baseline)
                THEN v - baseline END AS rise
    FROM b
), hits AS (
    SELECT *,
           greatest(coalesce($sigmas, 8.0)
                        * greatest(jump * (1.4826 / sqrt(2)), spread,
                                 coalesce($floor, 0.01) * abs(baseline)),
                    (coalesce($ratio, 2.0) - 1) * abs(baseline),
                    -- the run's usual sudden rise (NULL, no bar, while it had fewer)
                    coalesce($margin, 3.0) * (max(rise, coalesce($rank, 2)) OVER (
                        ORDER BY line_id ROWS BETWEEN coalesce($history, 5000) PRECEDING
                                              AND 1 PRECEDING))[coalesce($rank, 2)])
               AS threshold
    FROM e
)
SELECT step, value, baseline, value / baseline AS ratio
FROM hits
WHERE excess > threshold AND jump IS NOT NULL AND rise IS NOT NULL
ORDER BY line_id
