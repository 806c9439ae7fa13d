-- title: Allocator background threads
-- description: Lets DuckDB's allocator hand freed memory back to the system in the background,
--   so one big ad-hoc result does not leave the server holding a gigabyte afterwards.
SET allocator_background_threads = true
