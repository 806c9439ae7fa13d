-- title: When the monitor saw a file grow
-- description: `grew_at` is the monitor's own clock (Unix seconds) at the commit that stored
--   new bytes of a file already read, and for a file's first read (history found at start-up)
--   its modification time, never later than then. Stall alerts, GET /metrics' seconds since
--   the last line and the Runs page's order read it instead of `mtime`, the clock of whatever
--   wrote the file: a file dated in the future never stalled, and one dated 2 h back was
--   history that never stalled even while it still grew (issue 18). Files read before keep
--   their modification time as it stands, never later than now.

ALTER TABLE files ADD COLUMN grew_at DOUBLE;
UPDATE files SET grew_at = least(mtime, epoch(current_timestamp)) WHERE mtime IS NOT NULL;
