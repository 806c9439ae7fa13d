"""Why DuckDB gave up on the database, what to tell the user, and when to try opening it again.

DuckDB invalidates a database after a failure it cannot undo; the keeper (database.py) asks
this module what the failure means::

    loss_cause(exc, folder)  -> "the database was invalidated by DuckDB after a write found no
                                 disk space (...): the disk holding /data/runs/.cliffwatch has
                                 0 B free of 8.0 GiB; free space there (or pass --db ...)"
    damaged(exc)             -> True when the file itself does not read back as a database
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..command import COMMAND
from ..units import binary

# after a write found no disk space, the file is opened again only once this much more is free
# (a reopening on a full disk replays the WAL and is invalidated again at the first checkpoint)
ROOM_BACK_BYTES, ROOM_BACK_SHARE = 16 * 2**20, 0.01  # whichever is less
FULL_RETRY_S = 60.0  # ... or this long after the last try (the room may have come meanwhile)
_NO_SPACE = ("no space left", "disk is full", "disk quota")
_TOO_LARGE = "file too large"  # EFBIG: the filesystem's largest file, or `ulimit -f`
_NO_MEMORY = ("out of memory", "could not allocate", "failed to pin", "failed to allocate")
# what DuckDB says when the file itself cannot be read back as a database
_DAMAGED = ("not a valid duckdb database", "corrupt database file", "could not read enough bytes",
            "checksum", "serialization error", "failed to deserialize")
# what only the database holds: the rest is read again from the logs
REBUILD_LOSES = ("alert history (states, transitions, notifications), silences, the delivery "
                 "log and messages not yet delivered")


def invalidated(error: BaseException | str | None) -> bool:
    """DuckDB gave up on the database: every statement fails until it is opened again."""
    if isinstance(error, duckdb.FatalException):
        return True
    return error is not None and "database has been invalidated" in str(error)


def damaged(error: BaseException | str | None) -> bool:
    """The file itself does not read back as a database: the logs must be read again."""
    text = str(error or "").lower()
    return any(s in text for s in _DAMAGED)


def rebuild_advice(path: Path | str | None = None) -> str:
    where = f" {path}" if path else ""
    return (f"the database file{where} is damaged. The logs are the source of truth: stop the "
            f"monitor and start it with --rebuild (`{COMMAND} serve --logdir DIR --rebuild`, or "
            "`ingest --rebuild`), which moves the file aside (never deletes it) and reads the "
            f"logs again; a rebuild loses what only the database holds: {REBUILD_LOSES}")


def loss_cause(error: BaseException | str, folder: Path | None = None) -> str:
    """Why DuckDB invalidated the database, with what to do: the disk, named with its free
    space, when a write found none; the memory limit when it ran out of memory."""
    text = str(error)
    original = text.split("Original error:", 1)[-1].strip().strip('"')
    detail = " ".join(original.split("\n\n")[0].split())[:300]
    lower = original.lower()
    if no_space(original):
        folder = folder or _written_folder(original)
        return (f"the database was invalidated by DuckDB after a write found no disk space "
                f"({detail}): {disk_room(folder)}; free space there (or pass --db on a bigger "
                "disk)")
    if _TOO_LARGE in lower:
        return (f"the database was invalidated by DuckDB after a write went past the largest "
                f"file allowed ({detail}): the filesystem's limit, or this process's `ulimit "
                "-f`; raise it, or pass --db on another filesystem")
    if any(s in lower for s in _NO_MEMORY):
        return (f"the database was invalidated by DuckDB after it ran out of memory ({detail}); "
                "raise --memory-limit if this comes back")
    return f"the database was invalidated by DuckDB ({detail})"


def no_space(error: BaseException | str) -> bool:
    return any(s in str(error).lower() for s in _NO_SPACE)


def free_space(folder: Path) -> tuple[int, int] | None:
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return None
    return usage.free, usage.total


def disk_room(folder: Path | None) -> str:
    room = free_space(folder) if folder is not None else None
    if room is None:
        return f"the disk holding {folder or 'the database'} is full"
    return f"the disk holding {folder} has {binary(room[0])} free of {binary(room[1])}"


def _written_folder(text: str) -> Path | None:
    match = re.search(r'file "([^"]+)"', text)
    return Path(match.group(1)).parent if match else None


@dataclass
class Lost:
    """An episode of an invalidated database: since when, why, how the reopening goes."""

    since: float  # time.monotonic() of the first invalidation of the episode
    cause: str
    tries: int = 0  # reopenings that failed since the last invalidation
    last_error: str | None = None  # why the last reopening failed
    disk: Path | None = None  # a write found no space on this folder's disk ...
    free_at: int = 0  # ... which then had this many bytes free
    tried_at: float = 0.0  # time.monotonic() of the last reopening tried

    def room_back(self) -> bool:
        """False while the disk that was full has not gained room since (always True for
        another cause), unless the last try is FULL_RETRY_S old."""
        if self.disk is None or time.monotonic() - self.tried_at > FULL_RETRY_S:
            return True
        now = free_space(self.disk)
        return now is None or now[0] > self.free_at + min(ROOM_BACK_BYTES,
                                                           ROOM_BACK_SHARE * now[1])

    def message(self) -> str:
        waited = f"{time.monotonic() - self.since:.0f} s"
        if not self.room_back():
            how = f"by itself once its disk has room (waiting for {waited})"
        else:
            how = f"by itself (for {waited}" + (
                f"; reopening failed {self.tries} time(s), last: {self.last_error})"
                if self.tries else ")")
        return (f"{self.cause}; it is being opened again {how}: nothing stored is lost, every "
                "worker resumes from what it committed")
