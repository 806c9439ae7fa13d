-- title: Tracked files
-- description: Every tracked file with its committed offset and identity, loaded at start-up.
SELECT file_id, run, path, kind, inode, size, "offset", head, attempt, last_step, lines,
       mtime, grew_at, state, crlf_reported, partial_reported, tail,
       writers
FROM files
ORDER BY file_id
