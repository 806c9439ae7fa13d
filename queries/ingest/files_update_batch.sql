-- title: Commit many files' positions
-- description: Each file's row (offset and identity) in one statement for several files
--   (lists of equal length, one entry per file), in the same transaction as their rows.
-- param file_ids: file ids (example: [1])
-- param inodes: inode numbers (example: [1])
-- param sizes: file sizes when read (example: [0])
-- param offsets: byte offsets after the last consumed line (example: [0])
-- param heads: hex of each file's first bytes (example: [''])
-- param attempts: current attempt numbers (example: [1])
-- param last_steps: last steps read, or NULL (example: [0])
-- param lines: lines consumed so far (example: [0])
-- param mtimes: modification times (example: [0.0])
-- param grew_ats: when the monitor saw each file grow, by its own clock (example: [0.0])
-- param states: ok, deleted, unreadable, outside, not_regular or symlink_loop (example: ['ok'])
-- param crlfs: whether CRLF endings were reported (example: [false])
-- param partials: offset of an unfinished line already reported, or NULL (example: [NULL])
-- param tails: hashes of the bytes just before each offset (example: [''])
-- param writers: JSON of the processes writing each file, app/ingest/writers.py (example: [NULL])
UPDATE files SET
    inode = n.inode, size = n.size, "offset" = n."offset", head = n.head, attempt = n.attempt,
    last_step = n.last_step, lines = n.lines, mtime = n.mtime, grew_at = n.grew_at,
    state = n.state, crlf_reported = n.crlf, partial_reported = n.partial, tail = n.tail,
    writers = n.writers,
    updated_at = current_localtimestamp()
FROM (
    SELECT unnest($file_ids) AS file_id, unnest($inodes) AS inode, unnest($sizes) AS size,
           unnest($offsets) AS "offset", unnest($heads) AS head,
           unnest($attempts) AS attempt, unnest($last_steps) AS last_step,
           unnest($lines) AS lines, unnest($mtimes) AS mtime,
           unnest($grew_ats) AS grew_at, unnest($states) AS state, unnest($crlfs) AS crlf,
           unnest($partials) AS partial, unnest($tails) AS tail, unnest($writers) AS writers
) AS n
WHERE files.file_id = n.file_id
