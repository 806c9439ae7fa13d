-- title: Incidents table
-- description: What live detection found, for one run or all, optionally only some kinds,
--   most recent step first within a run, with a step range to open the Run page zoomed on
--   each: from_step..to_step pads the incident by `pad_lines` logged lines either side (at the
--   run's average steps per line, from the files table: no scan of the metrics), or by half
--   its own span when that is wider.
-- param run: run id, or NULL for every run (default: NULL) (example: 'seed-cliff')
-- param kinds: incident kinds to keep, or NULL for all (default: NULL) (example: ['spike', 'cliff'])
-- param pad_lines: lines of context either side (default: 20) (example: 20)
WITH pace AS (
    SELECT f.run, (max(f.last_step) - coalesce(min(a.start_step), 0)) / greatest(sum(f.lines), 1)
               AS steps_per_line
    FROM line_files AS f
    LEFT JOIN (SELECT run, min(start_step) AS start_step FROM attempts GROUP BY run) AS a
        USING (run)
    GROUP BY f.run
), padded AS (
    SELECT i.*, ceil(greatest(coalesce($pad_lines, 20) * coalesce(p.steps_per_line, 1),
                              (i.end_step - i.step) / 2, 1))::BIGINT AS pad
    FROM incidents AS i
    LEFT JOIN pace AS p USING (run)
    WHERE ($run IS NULL OR i.run = $run)
      AND ($kinds IS NULL OR list_contains($kinds, i.kind))
)
SELECT run, kind, metric, step, end_step, worst_step, value, baseline,
       array_to_string(causes, ', ') AS causes, array_to_string(evidence, ' ') AS evidence,
       detected_at, greatest(step - pad, 0) AS from_step, end_step + pad AS to_step
FROM padded
ORDER BY run, step DESC, kind
