-- title: The log directory a database serves
-- description: Stop 36: one --db given to two log directories merged their runs. A run folder
--   passed to `diagnose` is the run "." of its own log directory, so a second folder's
--   metrics.jsonl read on from the first one's offsets, in the same run, and the first
--   directory's files were marked deleted. The folder is recorded when a writer first opens
--   the file (path, and the folder's device and inode, so a folder moved or mounted elsewhere
--   is still known); a writer for another folder is refused (app/db/served.py).

CREATE TABLE served_folder (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    path VARCHAR NOT NULL,
    device UBIGINT NOT NULL,
    inode UBIGINT NOT NULL,
    since TIMESTAMP NOT NULL
);
