-- title: Lines after a file's tile watermark
-- description: How many stored lines of one file are not rolled into tiles yet.
-- param file: file id (example: 1)
-- param after: rowid of the last line rolled, -1 for none (example: -1)
SELECT count(*) AS lines FROM metric_rows WHERE file_id = $file AND rowid > $after
