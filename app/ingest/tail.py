"""The tailer: reads tracked files from their committed offsets and stores what it finds.

Watchdog events only say where to look; the tailer always decides from the file itself: its
inode, size, first bytes, the bytes before the offset stored in DuckDB (follow.py), opened only
if it is a regular file inside the log directory (openfile.py). Only complete lines (ending in
``\\n``) are consumed, so a line being written waits for its newline. One call to ``tick()``
reads at most ``chunk_bytes`` from each file, so a burst in one run never holds up the others;
``behind`` says a file has more to read right away::

    tailer = Tailer(db, Path("runs"), settings, scratch=Path("/dev/shm/cw"))
    tailer.tick(discover=True)   # -> rows ingested in this tick, from every file
    tailer.tick(changes=Changes(files={"demo/metrics.jsonl"}))  # that file, and those with
                                 # work under way, live runs' and the sweep's share (_focus)
    tailer.catch_up()            # ticks until nothing complete is left unread

A line the database refuses for its own content is recorded and skipped; any other failure
(out of memory, an aborted transaction) leaves the offset where it was and the file is tried
again with backoff (backoff.py), while the other files keep going. After running out of memory
a file is tried again with half the bytes (down to one line), so it progresses whenever
anything fits; a database DuckDB has invalidated stops ingest until a restart (``failure``).
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..db.database import Database
from . import batch, careful, fast, follow, memory, saves, wholefile
from .activity import Changes, Pace
from .backoff import Backoff, describe
from .filestate import FileState, grown, refresh
from .formats import detect, keymap
from .openfile import LogHandle, Refused, open_log
from .parse import EXCERPT, MAX_LINE, Problem, excerpt
from .scan import folders, in_folder, readable, scan
from .segment import HEAD_BYTES, Segment
from .store import Store, Uncertain

# the server's keeper opens the file again by itself (db/database.py); ingest --once cannot
REOPEN = ("a server opens the database again by itself; `ingest --once` must be run again "
          "(lines not stored yet are read then)")
log = logging.getLogger("cliffwatch.ingest")
ROTATE_WAIT_S = 10.0  # a rotated file is followed until it has not grown for this long
SCAN_KEY = "the log directory scan"  # the Backoff key of discovery
STATUS_KEY = "the runs' status"  # the Backoff key of reading which runs have ended
SETTLE_S = 0.4  # a TensorBoard file's last step is stored once the file is this still
# A file of a run without run_end that grew this recently is also looked at every tick, event
# or not: inotify sees no appends made on another machine of a network filesystem (without
# --poll), and drops events when its queue overflows. Quieter files wait for an event or the
# sweep.
LIVE_S = 600.0


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


@dataclass
class Rotated:
    """A file renamed away by logrotate ``create``: the trainer may still write to it
    through its open handle after the tailer switched to the new file (like Fluent Bit's
    Rotate_Wait). ``old`` is its position, attempt and last step (never stored in ``files``)."""

    rel: str  # its new name, relative to the log directory
    old: FileState
    grew: float  # time.monotonic() it last grew (or was renamed)


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
        self.files = {f.path: f for f in self.store.load_files()}
        self._reconsider_text()
        self.on_disk: dict[str, str] = {}  # stored path -> path on disk, where names differ
        self.pending: dict[str, Pending] = {}
        self.undecided: dict[str, tuple[int, float]] = {}  # path -> (size, mtime) sniffed
        # text files not a log yet: path -> (inode, where the lines looked at so far end)
        self.sniffed: dict[str, tuple[int, int]] = {}
        self.rotated: dict[str, Rotated] = {}  # tracked path -> its file before the rotation
        self.links_noted: set[str] = set()  # folder links out of the log directory, reported
        # folders (on disk) whose permissions refuse a listing: tried again every tick, since
        # no event says that permissions changed; and those said in the log (once each)
        self.locked: set[str] = set()
        self.locked_said: set[str] = set()
        # files refused for their permissions: looked at every tick too, for the same reason
        self.unreadable = {s.path for s in self.files.values() if s.state == "unreadable"}
        self.backoff = Backoff()
        self.unsure: set[str] = set()  # keys whose last commit raised: reload before reading
        self.dirty = False  # a failure may have left a transaction open on our cursor
        self.last_caught_up = time.time()
        self.pending_partial = 0  # files ending in an unfinished line after the last tick
        self.behind = False  # some file had more to read than one tick's budget
        self.bytes_read = 0  # from log files, in all (tests check that nothing is read twice)
        self.tried: dict[str, int] = {}  # path -> bytes of the batch last tried
        self.shrunk: dict[str, int] = {}  # path -> bytes read per tick after out-of-memory
        self.fatal: str | None = None  # the database was invalidated: nothing works until restart
        self.stored_as: dict[str, str] = {}  # path on disk -> stored path (on_disk reversed)
        self.known = set(self.files)  # paths on disk of the tracked files: not classified again
        self.finished = self._finished_runs()  # runs whose log has run_end
        self.ends_seen = False  # an events file grew this tick: ask the runs' status again
        self.live = self._recently_written()  # path -> time.monotonic() it last grew
        self.busy: set[str] = set()  # files with more to read than the last tick's budget
        self.file_pace = Pace(settings.scan_interval)  # the sweep over tracked files ...
        self.folder_pace = Pace(settings.scan_interval)  # ... and over the folders
        self.sweep_at = 0  # index in self.files of the sweep's next file
        self.walk = None  # the sweep's walk of the folders, under way
        self.walk_refused: list[str] = []  # folders it could not list, said at each step
        self.walked = 0  # folders it has met so far
        self.folder_count = 0  # folders the last whole walk met

    def discover(self) -> None:
        if SCAN_KEY in self.unsure:  # a file registered by a failed call may exist after all
            for state in self.store.load_files():
                self.files.setdefault(state.path, state)
                self.known.add(state.path)
            self.unsure.discard(SCAN_KEY)
        links_out: list[str] = []
        found, self.folder_count, refused = [], 0, []
        for folder, entries in folders(self.logdir, refused=refused):
            found += in_folder(self.logdir, folder, entries, self.known, links_out)
            self.folder_count += 1
        self.locked = set()
        self._lock(refused)
        self._track(found, links_out)
        self.walk = None  # the sweep starts its walk again

    def _track(self, found: list, links_out: list[str]) -> list[str]:
        """Register log files found on disk; returns the stored paths of those not tracked
        before."""
        added: set[str] = set()
        new, fresh = [], {}
        for item in found:
            self.known.add(item.real or item.path)
            if item.real is not None:
                self.on_disk[item.path] = item.real
                self.stored_as[item.real] = item.path
            if item.path not in self.files:
                fresh[item.path] = (item.run, item.path, item.kind)
        for state in self.store.add_files(list(fresh.values())):  # one statement for all
            self.files[state.path] = state
            added.add(state.path.rpartition("/")[0])
            new.append(state.path)
        if added:
            self._choose(added)
        for link in set(links_out) - self.links_noted:
            self.db.run("ingest/note_once", {"run": link, "file": link, "reason": (
                f"{link} is a folder link that leads outside the log directory; it is not "
                "read (copy or move the run folder into the log directory to monitor it)")})
            self.links_noted.add(link)
        return new

    def tick(self, discover: bool = False, changes: Changes | None = None) -> int:
        """Read what is new, up to ``chunk_bytes`` per file: in every file, or given
        ``changes`` (what watchdog events named) only in the files worth a look (``_focus``);
        returns rows ingested."""
        started, rows, caught_up, behind = time.time(), 0, True, False
        if self.fatal:
            self.behind = False
            return 0  # every statement would fail: `failure` says to restart
        if discover or (changes is not None and changes.everything):
            caught_up = self._attempt(SCAN_KEY, self.discover) is not None
            changes = None if discover else changes
        states = list(self.files.values())
        if changes is not None and not changes.everything:
            new = self._attempt(SCAN_KEY, self._discover_changes, changes)
            caught_up = new is not None
            states = self._focus(changes, new or [])
        rows += self._store_new(states)  # new logs many to a transaction (batch.py)
        self.busy = set()
        for state in states:
            seen = (state.offset, state.mtime, state.state)
            outcome = self._attempt(state.path, self._follow, state)
            done, added = outcome or (False, 0)
            rows += added
            caught_up &= done
            behind |= outcome is not None and not done
            if outcome is not None and not done:
                self.busy.add(state.path)
            if (state.offset, state.mtime, state.state) != seen:
                self._grew(state)
        if self.ends_seen:
            self._attempt(STATUS_KEY, self._read_finished)
        if caught_up:
            self.last_caught_up = started
        self.pending_partial = len(self.pending)
        self.behind = behind
        return rows

    def _store_new(self, states: list[FileState]) -> int:
        """Logs never read, stored a group to a transaction (batch.py: a catch-up of many
        small runs); the loop below reads those it leaves one by one, the rest unchanged."""
        if not self.fast_path:
            return 0
        ready = [(s, self.on_disk.get(s.path, s.path)) for s in batch.candidates(states)
                 if s.path not in self.unsure and s.path not in self.shrunk
                 and self.backoff.due(s.path)]
        rows = self._attempt(batch.KEY, batch.store, self.store, self.root, ready,
                             self.scratch, self._chunk) or 0
        for state, _ in ready:
            if state.offset:  # stored: followed as the loop's files that grew are
                self._grew(state)
        self.rows_by_path["fast"] += rows
        return rows

    # ---- which files a tick looks at ------------------------------------------------------

    def _focus(self, changes: Changes, new: list[str]) -> list[FileState]:
        """The files worth a look this tick: those events named or that are new, those with
        work under way (an unfinished line, a rotated file, a retry, more to read), those of
        live runs that grew lately (LIVE_S), and the sweep's share of all. A file of a finished
        run that nothing names costs nothing until the sweep comes round."""
        now = time.monotonic()
        # a file created by a rename onto a tracked name (run.json written atomically, a
        # folder moved back) is tracked already, and is read again
        paths = {self.stored_as.get(p, p) for p in changes.files | changes.created}
        self.unreadable = {p for p in self.unreadable
                           if p in self.files and self.files[p].state == "unreadable"}
        paths.update(new, self.pending, self.rotated, self.busy, self.unsure,
                     self.backoff.failing, self.unreadable)
        folders_named = changes.gone | {p for p in changes.created
                                        if os.path.isdir(f"{self.logdir}/{p}")}
        if folders_named:
            paths.update(self._under(folders_named))
        for path, grew in list(self.live.items()):
            state = self.files.get(path)
            if now - grew > LIVE_S or state is None or state.run in self.finished:
                del self.live[path]
            else:
                paths.add(path)
        paths.update(self._sweep_files())
        return sorted((self.files[p] for p in paths if p in self.files),
                      key=lambda state: state.file_id)

    def _under(self, gone: set[str]) -> list[str]:
        """Tracked files that were, or were under, the paths deleted or moved away."""
        prefixes = tuple(g + "/" for g in gone)
        return [path for path in self.files
                if (disk := self.on_disk.get(path, path)) in gone or disk.startswith(prefixes)]

    def _sweep_files(self) -> list[str]:
        """This tick's share of the slow pass over every tracked file."""
        count = self.file_pace.due(len(self.files))
        if not count:
            return []
        paths = list(self.files)
        start = self.sweep_at % len(paths)
        self.sweep_at = start + count
        return paths[start:start + count] + paths[:max(0, start + count - len(paths))]

    def _discover_changes(self, changes: Changes) -> list[str]:
        """Look for new log files where events say something was created (or a file no
        tracked path names was written), and in this tick's share of the sweep's walk; returns
        the stored paths of the files found."""
        if SCAN_KEY in self.unsure:
            self.discover()
            return list(self.files)
        links_out: list[str] = []
        found = self._unlocked(links_out) if self.locked else []
        unknown = {p for p in changes.files if p not in self.known}
        for rel in changes.created | unknown:
            found += self._created(rel, links_out)
        for folder, entries in self._sweep_folders():
            found += in_folder(self.logdir, folder, entries, self.known, links_out)
        return self._track(found, links_out)

    def _created(self, rel: str, links_out: list[str]) -> list:
        path = self.logdir / rel
        if path.is_dir() and not path.is_symlink():
            refused: list[str] = []
            found = scan(self.logdir, links_out, self.known, top=rel, refused=refused)
            self._lock(refused)
            return found
        folder, _, name = rel.rpartition("/")
        try:
            with os.scandir(self.logdir / folder) as entries:
                entry = [e for e in entries if e.name == name]
        except OSError:
            return []
        return in_folder(self.logdir, folder, entry, self.known, links_out)

    def _lock(self, refused: list[str]) -> None:
        """Folders that cannot be listed: said once, in ingest_errors and the log, and tried
        again every tick (``_unlocked``)."""
        for rel in refused:
            self.locked.add(rel)
            if rel in self.locked_said:
                continue
            self.locked_said.add(rel)
            shown = readable(rel) or "."
            reason = (f"the folder {shown} cannot be listed (permission denied), so no log in it "
                      "is read; fix its permissions (chmod a+rx, or run cliffwatch as a user "
                      "that may read it) and its logs are read at the next tick")
            log.warning("%s", reason)
            self.db.run("ingest/note_once", {"run": shown, "file": shown, "reason": reason})

    def _unlocked(self, links_out: list[str]) -> list:
        """The logs in folders that could not be listed before and can now (those that still
        cannot stay locked)."""
        refused: list[str] = []
        found = []
        for rel in sorted(self.locked):
            found += scan(self.logdir, links_out, self.known, top=rel, refused=refused)
        self.locked = set()
        self._lock(refused)
        return found

    def _sweep_folders(self) -> list:
        """This tick's share of the slow walk of every folder (a new walk once one ends)."""
        share = []
        for _ in range(self.folder_pace.due(max(self.folder_count, 1))):
            if self.walk is None:
                self.walk_refused = []
                self.walk, self.walked = folders(self.logdir, refused=self.walk_refused), 0
            step = next(self.walk, None)
            self._lock(self.walk_refused)
            self.walk_refused.clear()
            if step is None:
                self.walk, self.folder_count = None, self.walked
                break
            self.walked += 1
            share.append(step)
        return share

    def _grew(self, state: FileState) -> None:
        """A followed file changed: keep it looked at every tick while its run is live."""
        if state.run not in self.finished:
            self.live[state.path] = time.monotonic()
        if state.kind == "events":  # run_start or run_end may have come (not counted in rows)
            self.ends_seen = True  # asked once at the tick's end, not once per file

    def _read_finished(self) -> None:
        self.finished, self.ends_seen = self._finished_runs(), False

    def _finished_runs(self) -> set[str]:
        return {run for (run,) in self.db.run("ingest/finished_runs").fetchall()}

    def _recently_written(self) -> dict[str, float]:
        """At start: the files of live runs written in the last LIVE_S seconds."""
        now, wall = time.monotonic(), time.time()
        return {s.path: now for s in self.files.values()  # grew_at: our clock, not the file's
                if s.run not in self.finished and s.grew_at and wall - s.grew_at < LIVE_S}

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
        return self.fatal or self.backoff.summary()

    def _attempt(self, key: str, work, *args):
        """``work(*args)``, unless ``key`` is waiting out its backoff (then None). A failure
        here is never a line's fault (those are recorded and skipped below it): the offset
        stays, the file's state is read back from the database before its next try, and the
        work is tried again later."""
        if not self.backoff.due(key):
            return None
        try:
            if self.dirty:
                self._settle()
            result = work(*args)
        except Exception as exc:  # every failure is retried, none is fatal
            self.dirty = True
            self.unsure.add(key)
            if isinstance(exc, Uncertain):  # those files' rows are read back first
                self.unsure.update(exc.paths)
                exc = exc.__cause__ or exc
            self._failed(key, exc)
            return None
        self.backoff.succeeded(key)
        self.tried.pop(key, None)
        if key in self.shrunk:  # it fit: try a bigger batch next time
            self.shrunk[key] *= 2
            if self.shrunk[key] >= self._chunk:
                del self.shrunk[key]
        return True if result is None else result

    def _failed(self, key: str, exc: Exception) -> None:
        if memory.fatal(exc):
            if self.fatal is None:
                log.error("ingest stopped: %s; %s", describe(exc), REOPEN)
            self.fatal = (f"ingest failing: the database was invalidated ({describe(exc)}); "
                          f"{REOPEN}")
            return
        if not memory.out_of_memory(exc) or key not in self.tried:
            self.backoff.failed(key, exc)
            return
        tried = self.tried.pop(key)
        if tried <= 1:  # one line already
            self.backoff.failed(key, exc, note="a single line of this file does not fit in "
                                "the memory limit: raise --memory-limit")
            return
        self.shrunk[key] = max(1, tried // 2)
        self.backoff.failed(key, exc, note="retrying with a smaller batch", soon=True)

    def _settle(self) -> None:
        """End the transaction a failure may have left open (aborted) on this thread's
        cursor. The cursor is rolled back, never closed or dropped: with DuckDB 2.0, closing a
        cursor whose rollback failed crashed the process (segfault) at the next BEGIN; a
        rollback tried again once memory is free succeeds."""
        try:
            self.db.cursor().rollback()
        except duckdb.TransactionException as exc:
            if "no transaction is active" not in str(exc):
                raise
        self.dirty = False

    def _reconsider_text(self) -> None:
        """Text files skipped when only llm.c's lines were read (kind ``llmc``, not read at
        all) are asked again under the text reader's rules (formats/detect.py), once per
        start; not one that another log of its folder wins over (``choose``)."""
        folders: dict[str, list[FileState]] = {}
        for state in self.files.values():
            folders.setdefault(state.path.rpartition("/")[0], []).append(state)
        for members in folders.values():
            losers = {name for name, _ in detect.choose(
                [m.path.rpartition("/")[2] for m in members])[1]}
            for state in members:
                if (state.kind, state.state, state.offset) == (detect.LLMC, "skipped", 0) \
                        and state.path.rpartition("/")[2] not in losers:
                    state.state = "ok"  # in memory: the next read decides and commits

    # ---- one file -------------------------------------------------------------------------

    def _follow(self, state: FileState) -> tuple[bool, int]:
        """Catch one file up by one budget; returns (nothing complete left unread, rows)."""
        if state.path in self.unsure:
            refresh(self.db, state)
            self.pending.pop(state.path, None)
            self.unsure.discard(state.path)
        if state.state == "skipped":
            return True, 0  # another log of the run is read, or it is no log (recorded once)
        late = self._follow_rotated(state) if state.path in self.rotated else 0
        rel = self.on_disk.get(state.path, state.path)
        if state.kind == saves.KIND:  # a checkpoint folder or file: its time, never its bytes
            if saves.read(self.store, state, f"{self.root}/{rel}"):  # waits for its run's lines
                self.live.setdefault(state.path, time.monotonic())
            return True, 0
        if self._unchanged(state, f"{self.logdir}/{rel}"):  # a str: no Path built per look
            return True, late
        try:
            handle = open_log(self.root, rel)
        except FileNotFoundError:
            rows, renamed = self._finish_renamed(state)
            self._vanished(state, renamed)
            return True, rows + late
        except Refused as refused:
            self._refuse(state, refused)
            return True, late
        with handle:
            done, rows = self._read(state, handle)
            return done, rows + late

    def _unchanged(self, state: FileState, path: str) -> bool:
        """A stat says nothing new since the last look (the common case, kept cheap)."""
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return state.state == "deleted"  # still gone
        except OSError:
            return False
        if self.undecided.get(state.path) == (info.st_size, info.st_mtime):
            return True  # a file that could not tell what it is yet, and has not grown
        if state.state != "ok":
            return False  # refused or back: look again (cheaply: nothing is read)
        if info.st_ino != state.inode:
            return False
        pending = self.pending.get(state.path)
        if pending is not None and pending.offset == state.offset:
            if (info.st_size, info.st_mtime) != (pending.scanned_to, pending.mtime):
                return False
            if state.kind == "tfevents" and time.monotonic() - pending.since >= SETTLE_S:
                return False  # the held last step is complete now: read it
            self._check_partial(state, pending)
            return True
        return info.st_size == state.offset and info.st_mtime == state.mtime

    def _read(self, state: FileState, handle: LogHandle) -> tuple[bool, int]:
        rows = 0
        if state.inode is not None and handle.info.st_ino != state.inode:
            rows, renamed = self._finish_renamed(state)
            if renamed:
                self._note(state, f"file renamed to {renamed} (rotated); read to its end, "
                                  f"{state.offset} bytes; the new file is read from its start")
        new, reason = self._identity(state, handle)
        if state.kind in detect.FOREIGN and new.offset == 0 \
                and not self._is_log(state, new, handle):
            return True, rows
        if state.kind in wholefile.KINDS:
            done, stored = wholefile.read(self.store, state, new, handle, self.settings)
            self.rows_by_path["careful"] += stored
            return done, rows + stored
        if new.offset == 0 and state.path not in self.shrunk and self.fast_path:
            whole = Segment(state, new, handle, None, reason)  # left on disk for DuckDB
            outcome = fast.store(self.store, whole, self.scratch, self.links)
            if outcome.refused is None:
                self.rows_by_path["fast"] += outcome.rows
                return True, rows + outcome.rows
        pending = self._pending_at(state, new, handle, reason)
        if pending is not None and state.kind != "tfevents":
            done = self._wait_for_newline(state, handle, pending)
            if done is not None:
                return done, rows
        data, spent = self._take(state, handle, new.offset)
        end = self._complete(state, data, new.offset, pending)
        if end == 0:
            return self._no_newline(state, new, data, handle, reason), rows
        self.tried[state.path] = 1 if data.count(b"\n", 0, end) == 1 else end
        rows += self._consume(state, new, data[:end], handle, reason)
        if spent:
            return False, rows  # this tick's budget for the file is spent; more may follow
        self._remember_rest(state, handle, data[end:])
        return True, rows

    def _complete(self, state: FileState, data: bytes, base: int, pending) -> int:
        """How many of ``data``'s bytes are complete: whole lines, or for a TensorBoard file
        whole records up to the last step's (held until the file has settled: the rest of
        that step's scalars may still be coming)."""
        if state.kind != "tfevents":
            return data.rfind(b"\n") + 1
        from .formats import tfevents  # protobuf: only for TensorBoard files

        settled = pending is not None and time.monotonic() - pending.since >= SETTLE_S
        return tfevents.parse(data, base, final=settled)[2]

    def _is_log(self, state: FileState, new: FileState, handle: LogHandle) -> bool:
        """Whether another trainer's file, not read before, holds a log: an answer from its
        first bytes (formats/detect.py); a file that is none is recorded once as skipped,
        one that cannot tell yet (empty, no complete line) is asked again when it grows."""
        copy_of = saves.take_over(self.store, self.files.values(), state, new, handle.real)
        if copy_of:
            self._skip(state, new, copy_of)
            return False
        name = state.path.rsplit("/", 1)[-1]
        before = self._sniffed_to(state.path, handle)
        head = self._pread(handle, before, detect.sniff_bytes(name) - before)
        fmt, why = detect.detect(name, head, self.store.keymap(state.run), before)
        self.sniffed.pop(state.path, None)
        if fmt == detect.PENDING and detect.by_name(name) == detect.TEXT:
            self.sniffed[state.path] = (handle.info.st_ino, before + head.rfind(b"\n") + 1)
        if fmt == detect.PENDING:
            if why.startswith(detect.NOT_YET) and state.path not in self.undecided:
                # said once (each start): a text file with no log line so far, kept looking at
                self.store.record(state, copy.copy(state), Problem(0, "info", why))
            self.undecided[state.path] = (handle.info.st_size, handle.info.st_mtime)
            return False
        self.undecided.pop(state.path, None)
        if fmt is None:
            self._skip(state, new, why)
            return False
        return True

    def _sniffed_to(self, path: str, handle: LogHandle) -> int:
        """Where a text file's lines looked at before end (0 if replaced or cut since)."""
        inode, end = self.sniffed.get(path, (None, 0))
        return end if inode == handle.info.st_ino and end <= handle.info.st_size else 0

    def _skip(self, state: FileState, new: FileState, why: str) -> None:
        """Record once that a file is not read, and why (an ``info`` row, not an error)."""
        new.state = "skipped"
        self.store.record(state, new, Problem(0, "info", f"not read: {why}"))

    def _choose(self, folders: set[str]) -> None:
        """Of two logs of one run in a folder, read one (formats/detect.py's ``choose``): the
        other is recorded as skipped."""
        members: dict[str, dict[str, FileState]] = {f: {} for f in folders}
        for state in self.files.values():
            folder, _, name = state.path.rpartition("/")
            if folder in members:
                members[folder][name] = state
        for names in members.values():
            current = [n for n, s in names.items() if s.state == "ok" and s.offset > 0]
            for name, why in detect.choose(names, current)[1]:
                if names[name].state != "skipped":
                    self._skip(names[name], copy.copy(names[name]), why)

    @property
    def _chunk(self) -> int:
        """Bytes read from one file per tick: ``chunk_bytes``, but always a whole line of the
        longest size allowed, so the budget never splits a line that should be stored."""
        return max(self.settings.chunk_bytes, MAX_LINE + 1)

    def _take(self, state: FileState, handle: LogHandle, offset: int) -> tuple[bytes, bool]:
        """The bytes to read this tick from ``offset``, and whether more may follow at once:
        one budget, or after running out of memory (``shrunk``) the whole lines within fewer
        bytes, but always at least one line."""
        chunk, small = self._chunk, self.shrunk.get(state.path)
        data = self._pread(handle, offset, small or chunk)
        if small is None:
            return data, len(data) == chunk
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) == small:  # the first line is longer: read it whole
            data += self._pread(handle, offset + small, chunk - small)
            end = data.find(b"\n") + 1
        if end == 0:
            return data, len(data) == chunk
        return data[:end], True

    def _pread(self, handle: LogHandle, offset: int, size: int) -> bytes:
        data = handle.read(offset, size)
        self.bytes_read += len(data)
        return data

    def _identity(self, state: FileState, handle: LogHandle):
        """A copy of the state to update, reset to offset 0 if the file was truncated or
        replaced; with the reason."""
        new = copy.copy(state)
        new.state = "ok"
        reason = follow.change(state, handle) if state.kind not in wholefile.KINDS else None
        if reason:
            new.offset, new.last_step, new.lines, new.head, new.tail = 0, None, 0, None, None
            new.partial_reported, new.crlf_reported = None, False
            self.pending.pop(state.path, None)
        new.inode, new.mtime = handle.info.st_ino, handle.info.st_mtime
        new.grew_at = grown(state, new.mtime)
        return new, reason

    def _consume(self, state, new: FileState, data: bytes, handle: LogHandle, reason) -> int:
        """Store complete lines: through the fast path if it takes them, else the careful
        path. ``new`` holds the position before ``data`` (reset already if the file was
        replaced)."""
        segment = Segment(state, new, handle, data, reason)
        if self.fast_path:
            outcome = fast.store(self.store, segment, self.scratch)
            if outcome.refused is None:
                self.rows_by_path["fast"] += outcome.rows
                return outcome.rows
            log.debug("%s: careful path (%s)", state.path, outcome.refused)
        rows = careful.store(self.store, segment)
        self.rows_by_path["careful"] += rows
        return rows

    # ---- unfinished and overlong lines ----------------------------------------------------

    def _pending_at(self, state: FileState, new: FileState, handle: LogHandle,
                    reason) -> Pending | None:
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

    def _no_newline(self, state, new: FileState, data: bytes, handle: LogHandle,
                    reason) -> bool:
        """The unread part holds no newline: an unfinished line, or one over the budget."""
        if reason or state.state != new.state:  # commit the reset even though no line came
            self.store.record(state, new, reason=reason)
        if not data:
            self.pending.pop(state.path, None)
            return True
        pending = Pending(state.offset, handle.info.st_ino, time.monotonic(),
                          state.offset + len(data), handle.info.st_mtime, data[:EXCERPT])
        self.pending[state.path] = pending
        if len(data) == self._chunk:
            return False  # a line longer than a read: the next tick searches on from here
        self._check_partial(state, pending)
        return True

    def _remember_rest(self, state: FileState, handle: LogHandle, rest: bytes) -> None:
        if not rest:
            self.pending.pop(state.path, None)
            return
        self.pending[state.path] = Pending(state.offset, handle.info.st_ino, time.monotonic(),
                                           state.offset + len(rest), handle.info.st_mtime,
                                           rest[:EXCERPT])

    def _wait_for_newline(self, state: FileState, handle: LogHandle,
                          pending: Pending) -> bool | None:
        """Search for the pending line's newline in bytes not searched before (at most one
        budget per tick). Returns None when the line is complete and fits a read (read it
        normally), else whether the file is caught up."""
        budget = self._chunk
        while budget > 0:
            block = self._pread(handle, pending.scanned_to, min(budget, 1 << 20))
            if not block:
                break
            budget -= len(block)
            found = block.find(b"\n")
            if found >= 0:
                end = pending.scanned_to + found + 1
                self.pending.pop(state.path, None)
                if end - pending.offset <= self._chunk:
                    return None  # a normal read takes it (and reports it if over 1 MiB)
                return self._skip_long(state, handle, pending, end)
            pending.scanned_to += len(block)
        pending.mtime = handle.info.st_mtime
        self._check_partial(state, pending)
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

    def _check_partial(self, state: FileState, pending: Pending) -> None:
        """Report an unfinished last line once it has waited too long for its newline."""
        waited = time.monotonic() - pending.since
        if waited < self.settings.partial_line_timeout \
                or state.partial_reported == pending.offset:
            return
        new = copy.copy(state)
        new.partial_reported = pending.offset
        size = pending.scanned_to - pending.offset
        then = (f"it is {size} bytes so far, over the 1 MiB limit, and is skipped once "
                "complete" if size > MAX_LINE else "it is read if it is ever completed")
        problem = Problem(pending.offset, "error", f"unfinished line: no newline after "
                          f"{waited:.0f} s (writer crashed?); {then}", excerpt(pending.start))
        self.store.record(state, new, problem)

    # ---- run.json, rotation, files that are gone or refused -------------------------------

    def _finish_renamed(self, state: FileState) -> tuple[int, str | None]:
        """logrotate ``create``: the file was renamed in its folder (metrics.jsonl ->
        metrics.jsonl.1) and maybe a new one created. Lines the old inode got after the last
        look are read from it, found by inode, before the new file starts. Returns (rows, the
        old file's new name or None)."""
        if state.inode is None or state.state != "ok" or state.kind in wholefile.KINDS:
            return 0, None
        folder, name = os.path.split(self.on_disk.get(state.path, state.path))
        renamed = follow.find_inode(self.root / folder, state.inode, name)
        if renamed is None:
            return 0, None
        try:
            handle = open_log(self.root, os.path.join(folder, renamed))
        except (OSError, Refused):
            return 0, None
        rows = 0
        with handle:
            if handle.info.st_ino != state.inode or follow.change(state, handle):
                return 0, None
            while data := self._pread(handle, state.offset, self._chunk):
                end = data.rfind(b"\n") + 1
                if end == 0:
                    break  # an unfinished last line waits in self.rotated, then is dropped
                new = copy.copy(state)
                rows += self._consume(state, new, data[:end], handle, None)
        self.rotated[state.path] = Rotated(os.path.join(folder, renamed), copy.copy(state),
                                           time.monotonic())
        return rows, renamed

    def _follow_rotated(self, state: FileState) -> int:
        """Read what a rotated file got since the switch (the trainer's handle still points at
        it until it reopens its log); let it go once it has not grown for ROTATE_WAIT_S."""
        rotated = self.rotated[state.path]
        if time.monotonic() - rotated.grew > ROTATE_WAIT_S:
            del self.rotated[state.path]
            return 0
        try:
            handle = open_log(self.root, rotated.rel)
        except (OSError, Refused):
            del self.rotated[state.path]
            return 0
        with handle:
            if handle.info.st_ino != rotated.old.inode or handle.info.st_size < rotated.old.offset:
                del self.rotated[state.path]
                return 0
            data = self._pread(handle, rotated.old.offset, self._chunk)
            end = data.rfind(b"\n") + 1
            if end == 0:
                return 0
            old = copy.copy(rotated.old)
            rows, refused = careful.store_late(self.store, state, old, data[:end])
            if refused is not None:
                log.warning("%s: lines of %s refused (%s); not read", state.path, rotated.rel,
                            refused)
                del self.rotated[state.path]
                return 0
        old.offset += end
        rotated.old, rotated.grew = old, time.monotonic()
        return rows

    def _note(self, state: FileState, reason: str) -> None:
        self.store.record(state, copy.copy(state), Problem(state.offset, "warning", reason))

    def _vanished(self, state: FileState, renamed: str | None) -> None:
        if state.state == "deleted":
            return
        new = copy.copy(state)
        new.state = "deleted"
        self.pending.pop(state.path, None)
        if renamed:
            reason = (f"file renamed to {renamed} (rotated); read to its end, {state.offset} "
                      "bytes; a new file under the old name is read from its start")
        else:
            reason = f"file deleted; {state.offset} of {state.size} bytes had been read"
        self.store.record(state, new, Problem(state.offset, "warning", reason))

    def _refuse(self, state: FileState, refused: Refused) -> None:
        """Record once why a file is not read (no excerpt: it may not be ours to show)."""
        self.pending.pop(state.path, None)
        if refused.state == "unreadable":
            self.unreadable.add(state.path)
        if state.state == refused.state:
            return
        new = copy.copy(state)
        new.state = refused.state
        self.store.record(state, new, Problem(state.offset, refused.severity, refused.message))
