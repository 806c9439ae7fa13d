-- title: Commit many files' positions
-- description: ingest/file_update for several files in one statement (lists of equal
--   length, one entry per file), in the same transaction as their rows.
-- param file_ids: file ids (example: [1])
-- param inodes: inode numbers (example: [1])
-- param sizes: file sizes when read (example: [0])
-- param offsets: byte offsets after the last consumed line (example: [0])
-- param heads: hex of each file's first bytes (example: [''])
-- param attempts: current attempt numbers (example: [1])
-- param last_steps: last steps read (example: [0])
-- param lines: lines consumed so far (example: [0])
-- param mtimes: modification times (example: [0.0])
-- param grew_ats: when the monitor saw each file grow, by its own clock (example: [0.0])
-- param tails: hashes of the bytes just before each offset (example: [''])
UPDATE files SET
    inode = n.inode, size = n.size, "offset" = n."offset", head = n.head, attempt = n.attempt,
    last_step = n.last_step, lines = n.lines, mtime = n.mtime, grew_at = n.grew_at,
    state = 'ok', tail = n.tail,
    updated_at = current_localtimestamp()
FROM (
    SELECT unnest($file_ids) AS file_id, unnest($inodes) AS inode, unnest($sizes) AS size,
           unnest($offsets) AS "offset", unnest($heads) AS head,
           unnest($attempts) AS attempt, unnest($last_steps) AS last_step,
           unnest($lines) AS lines, unnest($mtimes) AS mtime,
           unnest($grew_ats) AS grew_at, unnest($tails) AS tail
) AS n
WHERE files.file_id = n.file_id
