-- title: Spill directory
-- description: Where DuckDB writes what does not fit in the memory limit (sorts, joins, big
--   results): a private folder beside the database, inside the allowed directories, so a
--   spilling query neither fails for want of it nor writes anywhere else.
-- param dir: folder path; its parent must exist (example: '/tmp/cliffwatch-spill')
SET temp_directory = $dir
