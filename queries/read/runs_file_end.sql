-- title: End of a metrics file
-- description: How many stored lines of one metrics file have a rowid above `after`, and the
--   rowid of its newest line. The rowid bound is pushed into the scan, and row groups whose
--   file_id range leaves the file out are skipped, so a file whose tiles are rolled costs
--   only its unrolled tail.
-- param file: file id (example: 2)
-- param after: count only rowids above this, -1 for all (example: -1)
SELECT count(*) AS lines, max(rowid) AS last_line
FROM metric_rows
WHERE file_id = $file AND rowid > $after
