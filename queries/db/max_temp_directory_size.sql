-- title: Spill directory cap
-- description: The most disk DuckDB may spill to (DuckDB's own default is 90% of the free space
--   on that disk, which one read-only query could fill, starving every write of the monitor).
-- param size: a size such as 2GB or 123456789b (example: '2GB')
SET max_temp_directory_size = $size
