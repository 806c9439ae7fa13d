"""The tailer: each tick, the files worth a look are caught up by one budget each, and what
they hold is stored. Every question it asks has a room of its own:

- which files to look at this tick: schedule.py (from events and clocks);
- registering new files: tracking.py;
- a file's identity (follow.py), opening it (openfile.py) and reading it: this module;
- unfinished lines: unfinished.py; what is complete: settle.py; what a file is: sniff.py;
- rotation: rotation.py; files that are gone or refused: gone.py;
- storing it: fast.py, batch.py and careful.py, each through store.py's one transaction;
  the careful path's segments of a tick are held and stored together (together.py);
- what to do on failure: retry.py.

Watchdog events only say where to look; the tailer always decides from the file itself: its
inode, size, first bytes and the bytes before the offset stored in DuckDB::

    tailer = Tailer(db, Path("runs"), settings, scratch=Path("/dev/shm/cw"))
    tailer.tick(discover=True)   # -> rows ingested in this tick, from every file
    tailer.tick(changes=Changes(files={"demo/metrics.jsonl"}))  # it, and work under way
    tailer.catch_up()            # ticks until nothing complete is left unread
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from ..db.database import Database
from . import batch, careful, fast, follow, gone, memory, saves, settle, together, wholefile
from .activity import Changes
from .filestate import FileState, refresh
from .formats import detect, keymap
from .openfile import LogHandle, Refused, open_log
from .reads import Reads
from .retry import Retry
from .rotation import Rotations
from .schedule import Schedule
from .segment import Segment
from .sniff import Sniffer
from .store import Store
from .tracking import Tracker
from .unfinished import Unfinished

log = logging.getLogger("cliffwatch.ingest")
SCAN_KEY = "the log directory scan"  # the retry key of discovery
STATUS_KEY = "the runs' status"  # the retry key of reading which runs have ended


class Tailer:
    def __init__(self, db: Database, logdir: Path, settings, scratch: Path,
                 fast_path: bool = True, links: Path | None = None):
        self.db, self.logdir, self.settings, self.scratch = db, Path(logdir), settings, scratch
        self.fast_path = fast_path  # False: every line takes the careful path (tests compare)
        self.links = links  # a private folder on the logs' filesystem: whole logs are linked
        self.rows_by_path = {"fast": 0, "careful": 0}  # rows stored by each path, in all
        self.root = self.logdir.resolve()
        room = memory.column_room(settings.memory_limit)
        self.store = Store(db, max_columns=min(settings.max_metric_columns, room or 1 << 30))
        self.store.keymaps = keymap.load(keymap.path_for(settings.keys, self.logdir))
        self.reads = Reads(settings.chunk_bytes)
        self.retry = Retry(db, self.reads.chunk)
        self.tracker = Tracker(db, self.logdir, self.store, settings.scan_interval)
        self.files = self.tracker.files
        self.schedule = Schedule(db, self.files, settings.scan_interval)
        self.lines = Unfinished(self.store, self.reads, settings.partial_line_timeout)
        self.pending = self.lines.pending
        self.rotations = Rotations(self.root, self.store, self.reads)
        self.rotated = self.rotations.rotated
        self.sniffer = Sniffer(self.store, self.reads)
        self.group = together.Group(self.store, self.retry, self.lines, self.schedule)
        self.held = self.group.held  # this tick's careful-path segments, not stored yet
        # refused for their permissions: looked at every tick (no event says they changed)
        self.unreadable = {s.path for s in self.files.values() if s.state == "unreadable"}
        self.last_caught_up = time.time()
        self.pending_partial = 0  # files ending in an unfinished line after the last tick
        self.behind = False  # some file had more to read than one tick's budget
        # set from another thread (a Ctrl-C while the server's first catch-up runs): the tick
        # ends at the next transaction's edge, with what it committed kept
        self.halt = threading.Event()

    def tick(self, discover: bool = False, changes: Changes | None = None) -> int:
        """Read what is new, up to one budget per file: in every file, or given ``changes``
        (what watchdog events named) only in the files worth a look (schedule.py); returns
        rows ingested."""
        started, rows, caught_up, behind = time.time(), 0, True, False
        if self.retry.fatal:
            self.behind = False
            return 0  # every statement would fail: `failure` says to restart
        states = list(self.files.values())
        if discover or (changes is not None and changes.everything):
            caught_up = self.retry.attempt(SCAN_KEY, self._discover, None) is not None
            states = list(self.files.values())
        elif changes is not None:
            new = self.retry.attempt(SCAN_KEY, self._discover, changes)
            caught_up = new is not None
            states = self.schedule.focus(self._waiting(changes, new or []))
        rows += self._store_new(states)  # new logs many to a transaction (batch.py)
        self.schedule.busy = set()
        for state in states:
            if self.halt.is_set():
                behind = True  # the rest is read by the next start
                break
            if state.kind not in together.KINDS or self.held.full():
                rows, caught_up = self._store_held(rows, caught_up)  # it may ask of theirs
            seen = (state.offset, state.mtime, state.state)
            outcome = self.retry.attempt(state.path, self._follow, state)
            done, added = outcome or (False, 0)
            rows, caught_up = rows + added, caught_up and done
            if outcome is not None and not done:  # more to read than this tick's budget
                behind = True
                self.schedule.busy.add(state.path)
            if (state.offset, state.mtime, state.state) != seen:
                self.schedule.grew(state)
        rows, caught_up = self._store_held(rows, caught_up)
        if self.schedule.ends_seen:
            self.retry.attempt(STATUS_KEY, self.schedule.read_finished)
        if caught_up:
            self.last_caught_up = started
        self.pending_partial, self.behind = len(self.pending), behind
        return rows

    def catch_up(self) -> int:
        """Discover and read until nothing complete is left (files that fail are left to
        their backoff: see ``failure``)."""
        rows = self.tick(discover=True)
        while self.behind:
            rows += self.tick()
        return rows

    @property
    def failure(self) -> str | None:
        """One line on what is failing and being retried, or None."""
        return self.retry.summary()

    @property
    def bytes_read(self) -> int:
        return self.reads.bytes_read  # from log files, in all (tests: nothing read twice)

    def _discover(self, changes: Changes | None):
        """The whole walk (``changes`` None), or where events point: the new stored paths.
        After a failed call, files it registered may exist after all: the walk reloads."""
        reload = SCAN_KEY in self.retry.unsure
        self.retry.unsure.discard(SCAN_KEY)
        if changes is None or reload:
            self.tracker.discover(reload)
            return None if changes is None else list(self.files)
        return self.tracker.changed(changes)

    def _waiting(self, changes: Changes, new: list[str]) -> set[str]:
        """The paths events name or that are new, and those with work under way."""
        self.unreadable = {p for p in self.unreadable
                           if p in self.files and self.files[p].state == "unreadable"}
        return (self.tracker.named(changes) | set(new) | set(self.pending) | set(self.rotated)
                | self.retry.unsure | set(self.retry.backoff.failing) | self.unreadable)

    def _store_new(self, states: list[FileState]) -> int:
        """Logs never read, stored a group to a transaction (batch.py: a catch-up of many
        small runs); the loop reads those it leaves one by one, the rest unchanged."""
        if not self.fast_path:
            return 0
        retry = self.retry
        ready = [(s, self.tracker.disk(s.path)) for s in batch.candidates(states)
                 if s.path not in retry.unsure and s.path not in retry.shrunk
                 and retry.backoff.due(s.path)]
        rows = retry.attempt(batch.KEY, batch.store, self.store, self.root, ready,
                             self.scratch, self.reads.chunk, self.halt) or 0
        for state, _ in ready:
            if state.offset:  # stored: followed as the loop's files that grew are
                self.schedule.grew(state)
        self.rows_by_path["fast"] += rows
        return rows

    def _follow(self, state: FileState) -> tuple[bool, int]:
        """Catch one file up by one budget; returns (nothing complete left unread, rows)."""
        if state.path in self.retry.unsure:
            refresh(self.db, state)
            self.pending.pop(state.path, None)
            self.retry.unsure.discard(state.path)
        if state.state == "skipped":
            return True, 0  # another log of the run is read, or it is no log (recorded once)
        late = self.rotations.follow(state)
        rel = self.tracker.disk(state.path)
        if state.kind == saves.KIND:  # a checkpoint folder or file: its time, never its bytes
            if saves.read(self.store, state, f"{self.root}/{rel}"):  # waits for its run's lines
                self.schedule.live.setdefault(state.path, time.monotonic())
            return True, 0
        if self._unchanged(state, f"{self.logdir}/{rel}"):  # a str: no Path built per look
            return True, late
        try:
            handle = open_log(self.root, rel)
        except FileNotFoundError:
            rows, renamed = self.rotations.finish_renamed(state, rel, self._consume)
            self.pending.pop(state.path, None)
            gone.vanished(self.store, state, renamed)
            return True, rows + late
        except Refused as refused:
            self.pending.pop(state.path, None)
            if refused.state == "unreadable":
                self.unreadable.add(state.path)
            gone.refuse(self.store, state, refused)
            return True, late
        try:
            done, rows = self._read(state, handle)
        finally:
            if not self.held.holds(handle):  # a held segment's file stays open until stored
                handle.close()
        return done, rows + late

    def _unchanged(self, state: FileState, path: str) -> bool:
        """A stat says nothing new since the last look (the common case, kept cheap)."""
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return state.state == "deleted"  # still gone
        except OSError:
            return False
        if self.sniffer.still(state.path, info):
            return True  # a file that could not tell what it is yet, and has not grown
        if state.state != "ok" or info.st_ino != state.inode:
            return False  # refused, back or replaced: look again (cheaply: nothing is read)
        held = self.lines.unchanged(state, info)  # a file ending in an unfinished line
        if held is not None:
            return held
        return info.st_size == state.offset and info.st_mtime == state.mtime

    def _read(self, state: FileState, handle: LogHandle) -> tuple[bool, int]:
        rows = 0
        if state.inode is not None and handle.info.st_ino != state.inode:
            rows = self.rotations.switched(state, self.tracker.disk(state.path), self._consume)
        # a copy of the file read on, unless the old inode was found renamed (rotated): then
        # the new file under the name starts its own lines
        new, reason = follow.position(state, handle, state.kind not in wholefile.KINDS,
                                      copies=state.path not in self.rotations.rotated)
        if reason:
            self.pending.pop(state.path, None)
        if state.kind in detect.FOREIGN and new.offset == 0 \
                and not self.sniffer.is_log(state, new, handle, self.files.values()):
            return True, rows
        if state.kind in wholefile.KINDS:
            done, stored = wholefile.read(self.store, state, new, handle, self.settings)
            self.rows_by_path["careful"] += stored
            return done, rows + stored
        if new.offset == 0 and state.path not in self.retry.shrunk and self.fast_path:
            whole = Segment(state, new, handle, None, reason)  # left on disk for DuckDB
            outcome = fast.store(self.store, whole, self.scratch, self.links)
            if outcome.refused is None:
                self.rows_by_path["fast"] += outcome.rows
                return True, rows + outcome.rows
        pending = self.lines.at(state, new, handle, reason)
        if pending is not None and state.kind != "tfevents":
            done = self.lines.wait(state, handle, pending)
            if done is not None:
                return done, rows
        data, spent = self.reads.take(handle, new.offset, self.retry.shrunk.get(state.path))
        end = settle.complete(state, data, new.offset, pending, handle.info.st_mtime)
        if end == 0:
            return self.lines.no_newline(state, new, data, handle, reason), rows
        lines = state.kind != "tfevents"  # records, not lines: 64 MB counted for nothing
        self.retry.tried[state.path] = 1 if lines and data.count(b"\n", 0, end) == 1 else end
        stored = self._consume(state, new, data[:end], handle, reason, data[end:])
        if stored is None:
            return True, rows  # held: stored with the tick's others, its rest remembered then
        rows += stored
        if spent:
            return False, rows  # this tick's budget for the file is spent; more may follow
        self.lines.remember(state, handle, data[end:])
        return True, rows

    def _consume(self, state, new: FileState, data: bytes, handle: LogHandle, reason,
                 rest: bytes | None = None) -> int | None:
        """Store complete lines: through the fast path if it takes them, else the careful
        path. ``new`` holds the position before ``data`` (reset already if the file was
        replaced). Given ``rest`` (the bytes after them), careful-path lines of a file that
        is not failing are held for the tick's one transaction: None."""
        segment = Segment(state, new, handle, data, reason)
        if self.fast_path:
            outcome = fast.store(self.store, segment, self.scratch)
            if outcome.refused is None:
                self.rows_by_path["fast"] += outcome.rows
                return outcome.rows
            log.debug("%s: careful path (%s)", state.path, outcome.refused)
        if self.group.hold(segment, rest):
            return None
        rows = careful.store(self.store, segment)
        self.rows_by_path["careful"] += rows
        return rows

    def _store_held(self, rows: int, caught_up: bool) -> tuple[int, bool]:
        """The held segments stored (together.Group): ``rows`` with theirs added."""
        stored, stored_all = self.group.commit()
        self.rows_by_path["careful"] += stored
        return rows + stored, caught_up and stored_all
