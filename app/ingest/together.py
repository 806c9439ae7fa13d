"""One tick's careful-path segments of many files, stored in one transaction at its end.

Each file's segment is parsed when it is read, and held; at the tick's end (or once
GROUP_FILES or GROUP_BYTES are held) they are committed together by ``Store.commit_many``,
which writes the events, problems, runs and file rows of all of them one statement each. A
transaction per file cost a catch-up of 10,000 events logs 114 s, and nine live runs' appends
a transaction each per tick (issue 23)::

    held = Holding()
    held.add(store, segment, rest=b'{"step": 9', tried=812)   # read as careful.store reads
    together.store(store, held.take())   # (rows, True): all committed; (0, False): each alone

A group the database refuses (store.smaller's rule: a line's content, out of memory) is
rolled back whole, and each file is then stored alone as before (the careful path, with its
line-by-line backstop), so one file never takes the others' rows with it. A COMMIT that
raised is Uncertain for every file of the group (retry.py reads their rows back).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import careful
from .formats import detect, system
from .segment import Segment
from .store import Batch, Store, smaller

KEY = "one tick's files stored together"  # the tailer's Backoff key for this work
# Kinds whose reading looks at no other file: a save, a sniffed or a whole-file log may ask
# whether its run's lines are stored, so what is held is stored before one is read.
KINDS = frozenset({detect.METRICS, detect.EVENTS, detect.RANK, system.KIND})
GROUP_FILES = 256  # each holds its file open until stored: well under a 1,024 descriptor limit
GROUP_BYTES = 16 << 20  # parsed batches held in memory at once
# A segment this big pays its transaction off alone, and is stored at once: a catch-up's
# first rows are not kept waiting for the tick's end (the fast path's MIN_BYTES, too)
HOLD_BYTES = 256 << 10


@dataclass
class Held:
    """A segment read and parsed, waiting for the tick's transaction."""

    segment: Segment  # its handle stays open until it is stored (a file stored alone reads it)
    batch: Batch
    rest: bytes  # the unfinished line after the segment: remembered once it is stored
    tried: int | None  # retry.py's ``tried`` for the file, should it be stored alone


class Holding:
    def __init__(self):
        self.held: list[Held] = []
        self.size = 0  # bytes of the held segments

    def add(self, db_store: Store, segment: Segment, rest: bytes, tried: int | None) -> None:
        new = segment.after()
        parsed = careful.parse(segment.state.kind, segment.data, segment.start.offset, new,
                               segment.reason, db_store.keymap(segment.state.run))
        self.held.append(Held(segment, Batch(parsed, new, segment.reason), rest, tried))
        self.size += segment.size

    def takes(self, segment: Segment) -> bool:
        return segment.size < HOLD_BYTES

    def holds(self, handle) -> bool:
        """Whether the last segment held reads ``handle`` (then closed by ``close``)."""
        return bool(self.held) and self.held[-1].segment.handle is handle

    def full(self) -> bool:
        return len(self.held) >= GROUP_FILES or self.size >= GROUP_BYTES

    def take(self) -> list[Held]:
        held, self.held, self.size = self.held, [], 0
        return held


def close(group: list[Held]) -> None:
    for held in group:
        held.segment.handle.close()


def store(db_store: Store, group: list[Held]) -> tuple[int, bool]:
    """Commit the group in one transaction: (rows, True); or (0, False), rolled back, when
    the database refused it by store.smaller's rule (each file is then stored alone).
    Anything else (an Uncertain COMMIT) is raised."""
    try:
        return db_store.commit_many([(held.segment.state, held.batch) for held in group]), True
    except Exception as exc:
        if not smaller(exc):
            raise
        return 0, False


class Group:
    """The tailer's side of it: whether a segment waits for the tick's transaction, and
    storing what waits; a group the database refuses is stored file by file, each under its
    own retry as if it had not been held."""

    def __init__(self, db_store: Store, retry, lines, schedule):
        self.db_store, self.retry, self.lines, self.schedule = db_store, retry, lines, schedule
        self.held = Holding()

    def hold(self, segment: Segment, rest: bytes | None) -> bool:
        """Hold a careful-path segment (``rest``: the bytes after it) of a file that is not
        failing; True if held."""
        state, retry = segment.state, self.retry
        if rest is None or state.kind not in KINDS or not self.held.takes(segment) \
                or not retry.backoff.due(KEY) or state.path in retry.shrunk \
                or state.path in retry.backoff.failing:
            return False
        self.held.add(self.db_store, segment, rest, retry.tried.get(state.path))
        return True

    def commit(self) -> tuple[int, bool]:
        """Store the held segments, many to a transaction: (rows, whether every one was)."""
        group, rows, stored_all = self.held.take(), 0, True
        try:
            outcome = self.retry.attempt(KEY, store, self.db_store, group) \
                if len(group) > 1 else (0, False)
            if outcome is None:  # not stored (an Uncertain COMMIT): looked at, read back
                self.retry.unsure.update(item.segment.state.path for item in group)
                return 0, False
            rows = outcome[0]
            for item in group:
                added = 0 if outcome[1] else self._alone(item)
                if added is not None:
                    self.lines.remember(item.segment.state, item.segment.handle, item.rest)
                    self.schedule.grew(item.segment.state)
                rows, stored_all = rows + (added or 0), stored_all and added is not None
        finally:
            close(group)
        return rows, stored_all

    def _alone(self, item: Held) -> int | None:
        """A held segment stored alone (read again: a transaction that failed may have
        added to its batch), under its file's retry: rows, or None if it failed."""
        path = item.segment.state.path
        if item.tried is not None:
            self.retry.tried[path] = item.tried
        return self.retry.attempt(path, careful.store, self.db_store, item.segment)
