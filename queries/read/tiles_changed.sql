-- title: Files that got lines
-- description: The files with lines stored past rowid `since`, and the newest rowid of each
--   (rank and foreign files too: tiles_marks keeps the metrics files). metric_rows is only
--   appended to and DuckDB gives rowids at commit, in commit order, so an idle tile worker's
--   pass reads no stored block (only those past `since`), and no other table.
-- param since: the newest rowid already seen (example: -1)
SELECT file_id, max(rowid) AS newest
FROM metric_rows
WHERE rowid > $since
GROUP BY file_id
