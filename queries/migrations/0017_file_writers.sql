-- title: What a file remembers of the processes writing it
-- description: `writers` (JSON, app/ingest/writers.py) holds, per tracked file, the last
--   line's writer (step, clock, pace), another process still writing it if any, and the last
--   epoch: what the attempt rule needs to tell a resume (a step back into steps already
--   logged, an epoch reset) from a line logged twice, a few steps out of order, or the second
--   of two processes printing one log (issue 19). NULL until the careful path reads a file; a
--   state whose step is not the file's last_step (a fast-path chunk came after it) is read as
--   knowing that step only.

ALTER TABLE files ADD COLUMN writers VARCHAR;
