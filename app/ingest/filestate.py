"""One tracked log file's position, as stored in the ``files`` table.

A ``FileState`` mirrors one row of ``files``; the tailer changes it in memory only after the
transaction that stores it has committed::

    FileState(file_id=3, run="demo", path="demo/metrics.jsonl", kind="metrics",
              inode=1234, size=81920, offset=81920, attempt=1, last_step=400, lines=200,
              tail="9f2c...", writers='{"cur": {"step": 400, ...}, "other": null, ...}')
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields


@dataclass
class FileState:
    file_id: int
    run: str
    path: str
    kind: str
    inode: int | None = None
    size: int = 0
    offset: int = 0
    head: str | None = None  # hex of the first bytes
    attempt: int = 0
    last_step: int | None = None
    lines: int = 0
    mtime: float | None = None  # the file's own (its writer's clock): tells a change, no time
    grew_at: float | None = None  # when this monitor saw it grow, by its own clock: grown()
    state: str = "ok"
    crlf_reported: bool = False
    partial_reported: int | None = None
    tail: str | None = None  # hash of the bytes just before ``offset`` (identity: follow.py)
    writers: str | None = None  # JSON: the processes writing the file (writers.py), or None

    @property
    def rank(self) -> int | None:
        from .scan import LogFile

        return LogFile(self.path, self.run, self.kind).rank


def grown(state: FileState, mtime: float, now: float | None = None) -> float:
    """``grew_at`` for a read of ``state``'s file that found it at ``mtime``: on its first
    read (history found at start-up) its mtime, never later than now; unchanged since its last
    commit, as it was (the rest of a long catch-up); else when the monitor last saw it grow,
    moved on by what the file's own clock says passed since (``after_last``), never later
    than now. A file server's clock is no clock of ours: a file dated in the future never
    looked quiet, and one dated 2 h back looked like history while it grew (issue 18)."""
    now = time.time() if now is None else now
    if state.grew_at is None:
        return min(mtime, now)
    if mtime == state.mtime:
        return state.grew_at
    return after_last(state, mtime, now)


def after_last(state: FileState, mtime: float, now: float) -> float:
    """When new bytes were written, by our clock: the last growth we saw plus the file's own
    time since then (a difference of the file's clock: its skew cancels out). Lines written
    just after a server stopped, read by the next start hours later, are that old, not new: a
    run silent since then stalled then. Now where the two cannot be compared: the
    last growth was dated by the file's clock (its first read, grew_at == mtime) or the
    file's clock went back (a copy over it)."""
    if state.mtime is None or state.grew_at == state.mtime or mtime < state.mtime:
        return now
    return min(now, state.grew_at + (mtime - state.mtime))


def adopt(state: FileState, new: FileState) -> None:
    """Make ``state`` the committed ``new`` (after its transaction has committed)."""
    for field in fields(FileState):
        setattr(state, field.name, getattr(new, field.name))


def refresh(db, state: FileState) -> None:
    """Set ``state`` to the file's row as committed. After a commit that raised, memory and
    database may disagree: DuckDB can raise from COMMIT after the transaction became durable,
    and reading that batch again would store its lines twice."""
    result = db.run("ingest/file_load", {"file_id": state.file_id})
    names = [d[0] for d in result.description]
    row = dict(zip(names, result.fetchone(), strict=True))
    for field in fields(FileState):
        setattr(state, field.name, row[field.name])
