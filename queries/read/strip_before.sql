-- title: Bucket strip, the line before
-- description: The step of the run's last logged line (current timeline) before step `lo`,
--   no more than `window` steps before it (NULL: any distance): where the interval of the
--   range's first line starts. The step window is pushed into the scan (steps rise within an
--   attempt), so it reads a row group or two.
-- param run: run id (example: 'seed-cliff')
-- param lo: first step of the range (example: 2027)
-- param window: how many steps back to look, NULL for any (example: 4096)
SELECT max(step) AS step
FROM metrics
WHERE run = $run AND step < $lo AND step >= coalesce($lo - $window, -9223372036854775808)
