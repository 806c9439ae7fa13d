-- title: Bucket strip, sampled lines
-- description: The file, attempt, step and `buckets` of the metrics lines with the rowids
--   given (metrics_all.line_id) that log buckets: the lines a merged strip of a long range is
--   drawn from. The rowid list is pushed into the scan, so only those lines are read.
-- param lines: rowids of the lines (example: [0, 1, 2])
SELECT line, file_id, attempt, step, buckets
FROM (
    SELECT rowid AS line, * FROM metric_rows
    WHERE rowid = ANY($lines)
    UNION ALL BY NAME  -- buckets is a column only once a log has carried it
    SELECT NULL::INTEGER[] AS buckets WHERE false
)
WHERE len(buckets) > 0
