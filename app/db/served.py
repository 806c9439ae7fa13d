"""The one log directory a database serves.

A database's files are tracked by their path inside the log directory, and a run folder's own
files are the run ".". Given to a second folder, the same file would read that folder's
``metrics.jsonl`` on from the first one's offset, into the first one's run, and mark the first
folder's files deleted. So the folder is recorded on the first open for writing and a writer for
another folder is refused. The same folder at another path (renamed, moved on its disk, mounted
elsewhere: the same device and inode), or any folder whose own ``.cliffwatch/`` holds the file,
is the same folder: the record follows it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import CliffwatchError


def claim(db, logdir: Path, own_file: bool) -> None:
    """Record ``logdir`` as the folder ``db`` serves, or raise when it serves another one.
    ``own_file``: the database is ``logdir``'s default one (inside it)."""
    here = logdir.stat()
    row = db.run("ingest/served_folder").fetchone()
    if row is not None:
        path, device, inode = row
        if path == str(logdir):
            return
        if not own_file and (device, inode) != (here.st_dev, here.st_ino):
            raise CliffwatchError(_refusal(db.path, path, logdir))
    db.run("ingest/served_folder_set", {"path": str(logdir), "device": here.st_dev,
                                    "inode": here.st_ino})


def _refusal(db_path: Path, served: str, logdir: Path) -> str:
    return (f"{db_path} holds the runs of {served}, not of {logdir}: one database serves one "
            "log directory, and its runs would mix with these. Leave out --db (each log "
            f"directory keeps its own in .cliffwatch/), pass another file, or name {served} itself")
