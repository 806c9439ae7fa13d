-- title: Newest stored line
-- description: The highest rowid of metric_rows (-1 when empty): where the tile worker starts
--   watching for new lines.
SELECT coalesce(max(rowid), -1) AS newest FROM metric_rows
