-- title: Commit a file's position
-- description: Stores offset and identity in the same transaction as the rows read below it.
-- param file_id: file id (example: 1)
-- param inode: inode number (example: 1)
-- param size: file size when read (example: 0)
-- param offset: byte offset after the last consumed line (example: 0)
-- param head: hex of the file's first bytes (example: '')
-- param attempt: current attempt number (example: 0)
-- param last_step: last step read, or NULL (example: NULL)
-- param lines: lines consumed so far (example: 0)
-- param mtime: modification time (example: 0)
-- param grew_at: when the monitor saw the file grow, Unix seconds by its own clock (example: 0)
-- param state: ok, deleted, unreadable, outside, not_regular or symlink_loop (example: 'ok')
-- param crlf_reported: whether CRLF endings were reported (example: false)
-- param partial_reported: offset of an unfinished line already reported, or NULL (example: NULL)
-- param tail: hash of the bytes just before the offset, to notice a rewritten file (example: '')
-- param writers: JSON of the processes writing the file, app/ingest/writers.py (example: NULL)
UPDATE files SET
    inode = $inode, size = $size, "offset" = $offset, head = $head, attempt = $attempt,
    last_step = $last_step, lines = $lines, mtime = $mtime, grew_at = $grew_at,
    state = $state,
    crlf_reported = $crlf_reported, partial_reported = $partial_reported, tail = $tail,
    writers = $writers,
    updated_at = current_localtimestamp()
WHERE file_id = $file_id
