-- title: One tracked file
-- description: A tracked file's committed position, read again after a commit that raised: the
--   commit may have gone through (DuckDB can fail after the commit is durable), and the
--   database, not memory, says where the file's next line starts.
-- param file_id: file id (example: 1)
SELECT file_id, run, path, kind, inode, size, "offset", head, attempt, last_step, lines,
       mtime, grew_at, state, crlf_reported, partial_reported, tail,
       writers
FROM files
WHERE file_id = $file_id
