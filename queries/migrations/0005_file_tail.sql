-- title: File tail fingerprint
-- description: The bytes just before a file's committed offset, so a file truncated and rewritten
--   past that offset (copytruncate) is read again from its start instead of resumed mid-way.

ALTER TABLE files ADD COLUMN tail VARCHAR;  -- hash of up to 4 KiB before "offset"
