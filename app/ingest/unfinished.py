"""Unfinished and overlong lines: a line at a file's offset that has no newline yet.

Only complete lines (ending in ``\\n``) are consumed, so a line being written waits for its
newline. Each file's ``Pending`` line remembers how far its newline was searched for, so a
tick only reads bytes no tick has read before; one that waits too long is reported once
(``partial_line_timeout``), and one over 1 MiB is skipped once complete::

    lines = Unfinished(store, reads, settings.partial_line_timeout)
    pending = lines.at(state, new, handle, reason)   # the line still waiting here, or None
    lines.wait(state, handle, pending)   # None: complete, read it; else caught up or not
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from . import follow, settle
from .filestate import FileState, grown
from .openfile import LogHandle
from .parse import EXCERPT, MAX_LINE, Problem, excerpt
from .reads import Reads
from .segment import HEAD_BYTES
from .store import Store


@dataclass
class Pending:
    """An unfinished line at a file's offset: how far its newline was searched for, so a tick
    only reads bytes no tick has read before."""

    offset: int
    inode: int
    since: float  # time.monotonic() when it was first seen
    scanned_to: int  # bytes before this hold no newline
    mtime: float
    start: bytes  # its first bytes, for the report


class Unfinished:
    def __init__(self, store: Store, reads: Reads, timeout: float):
        self.store, self.reads, self.timeout = store, reads, timeout
        self.pending: dict[str, Pending] = {}

    def at(self, state: FileState, new: FileState, handle: LogHandle, reason) -> Pending | None:
        pending = self.pending.get(state.path)
        if pending is None or reason or (pending.offset, pending.inode) != (new.offset,
                                                                             new.inode):
            self.pending.pop(state.path, None)
            return None
        if handle.info.st_size < pending.scanned_to \
                or handle.read(pending.offset, len(pending.start)) != pending.start:
            # cut back and rewritten (a writer repairing its last line): search from the
            # line's start again, or a newline now before `scanned_to` is never seen
            self.pending.pop(state.path, None)
            return None
        return pending

    def no_newline(self, state, new: FileState, data: bytes, handle: LogHandle,
                   reason) -> bool:
        """The unread part holds no newline: an unfinished line, or one over the budget."""
        if reason or state.state != new.state:  # commit the reset even though no line came
            self.store.record(state, new, reason=reason)
        if not data:
            self.pending.pop(state.path, None)
            return True
        pending = self.remember(state, handle, data)
        if len(data) == self.reads.chunk:
            return False  # a line longer than a read: the next tick searches on from here
        self.check(state, pending)
        return True

    def remember(self, state: FileState, handle: LogHandle, rest: bytes) -> Pending | None:
        """The bytes after the file's last complete line, waiting for their newline."""
        if not rest:
            self.pending.pop(state.path, None)
            return None
        pending = self.pending[state.path] = Pending(
            state.offset, handle.info.st_ino, time.monotonic(), state.offset + len(rest),
            handle.info.st_mtime, rest[:EXCERPT])
        return pending

    def wait(self, state: FileState, handle: LogHandle, pending: Pending) -> bool | None:
        """Search for the pending line's newline in bytes not searched before (at most one
        budget per tick). Returns None when the line is complete and fits a read (read it
        normally), else whether the file is caught up."""
        budget = self.reads.chunk
        while budget > 0:
            block = self.reads.read(handle, pending.scanned_to, min(budget, 1 << 20))
            if not block:
                break
            budget -= len(block)
            found = block.find(b"\n")
            if found >= 0:
                end = pending.scanned_to + found + 1
                self.pending.pop(state.path, None)
                if end - pending.offset <= self.reads.chunk:
                    return None  # a normal read takes it (and reports it if over 1 MiB)
                return self._skip_long(state, handle, pending, end)
            pending.scanned_to += len(block)
        pending.mtime = handle.info.st_mtime
        self.check(state, pending)
        return budget > 0

    def _skip_long(self, state: FileState, handle: LogHandle, pending: Pending,
                   end: int) -> bool:
        new = copy.copy(state)
        new.state, new.inode, new.mtime = "ok", handle.info.st_ino, handle.info.st_mtime
        new.grew_at = grown(state, new.mtime)
        problem = Problem(pending.offset, "error", f"line is {end - 1 - pending.offset} bytes, "
                          "over the 1 MiB limit", excerpt(pending.start))
        new.offset, new.lines, new.size = end, new.lines + 1, handle.info.st_size
        new.tail = follow.fingerprint(handle, end)
        if pending.offset < HEAD_BYTES:
            new.head = handle.read(0, HEAD_BYTES).hex()
        self.store.record(state, new, problem)
        return False

    def unchanged(self, state: FileState, info) -> bool | None:
        """For a file whose stored end is an unfinished line: whether a stat (``info``) says
        nothing new (the line checked against its timeout); None for any other file."""
        pending = self.pending.get(state.path)
        if pending is None or pending.offset != state.offset:
            return None
        if (info.st_size, info.st_mtime) != (pending.scanned_to, pending.mtime):
            return False
        if state.kind == "tfevents" and settle.settled(pending):
            return False  # the held last step is complete now: read it
        self.check(state, pending)
        return True

    def check(self, state: FileState, pending: Pending) -> None:
        """Report an unfinished last line once it has waited too long for its newline."""
        waited = time.monotonic() - pending.since
        if waited < self.timeout or state.partial_reported == pending.offset:
            return
        new = copy.copy(state)
        new.partial_reported = pending.offset
        size = pending.scanned_to - pending.offset
        then = (f"it is {size} bytes so far, over the 1 MiB limit, and is skipped once "
                "complete" if size > MAX_LINE else "it is read if it is ever completed")
        problem = Problem(pending.offset, "error", f"unfinished line: no newline after "
                          f"{waited:.0f} s (writer crashed?); {then}", excerpt(pending.start))
        self.store.record(state, new, problem)
