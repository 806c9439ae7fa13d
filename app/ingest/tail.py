"""The tailer: reads every tracked file from its committed offset and stores what it finds.

Watchdog events only say "look now"; the tailer always decides from the file itself: its
inode, size, first bytes and the offset stored in DuckDB. Only complete lines (ending in
``\\n``) are consumed, so a line being written waits for its newline. One call to ``tick()``::

    tailer = Tailer(db, Path("runs"), settings, scratch=Path("/dev/shm/cw"))
    tailer.tick(discover=True)   # -> rows ingested in this tick
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from pathlib import Path

import pyarrow as pa

from app.db.database import Database
from app.ingest import bulk
from app.ingest.filestate import FileState
from app.ingest.parse import MAX_LINE, Parsed, Problem, excerpt, parse_lines
from app.ingest.scan import scan
from app.ingest.store import Batch, Store

log = logging.getLogger("cliffwatch.ingest")
HEAD_BYTES = 64


class Tailer:
    def __init__(self, db: Database, logdir: Path, settings, scratch: Path):
        self.db, self.logdir, self.settings, self.scratch = db, Path(logdir), settings, scratch
        self.store = Store(db)
        pa.array([0.0])  # pyarrow imports pandas on first use (0.3 s): pay it before any line
        self.files = {f.path: f for f in self.store.load_files()}
        self._partial: dict[str, tuple[int, float]] = {}  # path -> (offset, first seen)
        self.last_caught_up = time.time()
        self.pending_partial = 0  # files ending in an unfinished line after the last tick

    def discover(self) -> None:
        for found in scan(self.logdir):
            if found.path not in self.files:
                self.files[found.path] = self.store.add_file(found.run, found.path, found.kind)

    def tick(self, discover: bool = False) -> int:
        """Read everything new in every file; returns rows ingested."""
        if discover:
            self.discover()
        started, rows, caught_up, partial = time.time(), 0, True, 0
        for state in list(self.files.values()):
            try:
                done, added = self._follow(state)
            except Exception:
                log.exception("ingest of %s failed; will retry", state.path)
                done, added = False, 0
            rows += added
            caught_up &= done
            partial += state.path in self._partial
        if caught_up:
            self.last_caught_up = started
        self.pending_partial = partial
        return rows

    # ---- one file -------------------------------------------------------------------------

    def _follow(self, state: FileState) -> tuple[bool, int]:
        """Catch one file up; returns (nothing complete left unread, rows written)."""
        path = self.logdir / state.path
        try:
            info = os.stat(path)
        except FileNotFoundError:
            self._vanished(state)
            return True, 0
        new, reason = self._identity(state, info, path)
        if state.kind == "run_meta":
            return self._read_meta(state, new, info, path), 0
        if reason is None and info.st_size == state.offset and state.state == "ok":
            self._check_partial(state, b"")
            return True, 0
        rows = 0
        if new.offset == 0 and reason is None and state.kind in ("metrics", "rank"):
            rows = self._whole(state, new, path, info)
            if rows is not None:
                return True, rows
            rows = 0
        while True:
            try:
                data = _read(path, new.offset, self.settings.chunk_bytes)
            except FileNotFoundError:
                return False, rows
            except PermissionError:
                self._unreadable(state, new)
                return True, rows
            end = data.rfind(b"\n") + 1
            if end == 0:
                return self._no_newline(state, new, data, path, reason), rows
            rows += self._consume(state, new, data[:end], info, reason)
            reason, new = None, copy.copy(state)
            if len(data) < self.settings.chunk_bytes:
                self._check_partial(state, data[end:])
                return True, rows

    def _identity(self, state: FileState, info: os.stat_result, path: Path):
        """A copy of the state to update, reset to offset 0 if the file was truncated or
        replaced; with the reason."""
        new = copy.copy(state)
        new.state = "ok"
        reason = None
        if state.inode is not None and info.st_ino != state.inode:
            reason = "file_replaced"
        elif info.st_size < state.offset:
            reason = "file_truncated"
        elif state.head and info.st_mtime != state.mtime and _head(path, state.head) != state.head:
            # truncated and rewritten between two looks: same inode, but other first bytes
            reason = "file_replaced"
        if reason:
            new.offset, new.last_step, new.lines, new.head = 0, None, 0, None
            new.partial_reported, new.crlf_reported = None, False
        new.inode, new.mtime = info.st_ino, info.st_mtime
        return new, reason

    def _consume(self, state, new: FileState, data: bytes, info, reason) -> int:
        base = new.offset
        new.offset, new.size = base + len(data), info.st_size
        new.lines += data.count(b"\n")
        if base == 0:
            new.head = data[:HEAD_BYTES].hex()
        if state.kind in ("metrics", "rank") and reason is None:
            rows = self._bulk(state, new, data)
            if rows is not None:
                return rows
        parsed = parse_lines(data, base, events_only=state.kind == "events")
        if state.kind == "rank" and parsed.events:
            parsed.problems += [Problem(o, "warning", "event line in a rank file; ignored",
                                        excerpt(json.dumps(e).encode())) for o, e in parsed.events]
            parsed.events = []
        if reason:
            parsed.problems.insert(0, Problem(0, "warning", f"{reason.replace('_', ' ')}: "
                                              "read again from the start as a new attempt"))
        if parsed.crlf and not new.crlf_reported:
            parsed.problems.append(Problem(base, "warning", "file has CRLF (\\r\\n) line "
                                           "endings; lines are read normally"))
            new.crlf_reported = True
        try:
            return self.store.commit(state, Batch(parsed, new, reason))
        except Exception:
            if data.count(b"\n") == 1 and not parsed.rows and not parsed.events:
                raise  # nothing line-specific to skip: a database problem; retry next tick
            log.warning("%s: a batch could not be stored; storing it line by line", state.path)
            return self._line_by_line(state, data, base, info, reason)

    def _line_by_line(self, state: FileState, data: bytes, base: int, info, reason) -> int:
        """The backstop for a line the database refuses (a value no check foresaw): each line
        in its own transaction, and one that still fails is recorded and skipped, so one bad
        line never stops a file."""
        rows, offset = 0, base
        for raw in data.split(b"\n")[:-1]:
            line = raw + b"\n"
            new = copy.copy(state)
            new.offset, new.size, new.lines = offset + len(line), info.st_size, state.lines + 1
            if offset == 0:
                new.head = data[:HEAD_BYTES].hex()
            parsed = parse_lines(line, offset, events_only=state.kind == "events")
            try:
                rows += self.store.commit(state, Batch(parsed, new, reason))
            except Exception as exc:
                problem = Problem(offset, "error", f"could not store this line "
                                  f"({type(exc).__name__}: {str(exc).splitlines()[0]}); skipped",
                                  excerpt(raw))
                self.store.commit(state, Batch(Parsed(problems=[problem]), new, reason))
            reason, offset = None, offset + len(line)
        return rows

    def _whole(self, state: FileState, new: FileState, path: Path, info) -> int | None:
        chunk = bulk.whole_file(path, info.st_size)
        if chunk is None:
            return None
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
        trial = copy.copy(new)  # `new` stays as it was if the careful path has to read it
        trial.offset = trial.size = info.st_size
        trial.head = head.hex()
        return self.store.commit_bulk(state, trial, chunk)

    def _bulk(self, state: FileState, new: FileState, data: bytes) -> int | None:
        chunk = bulk.prepare(data, self.scratch)
        if chunk is None:
            return None
        try:
            return self.store.commit_bulk(state, new, chunk)
        finally:
            chunk.close()

    def _no_newline(self, state, new: FileState, data: bytes, path: Path, reason) -> bool:
        """The unread part holds no newline: an unfinished line, or one over 1 MiB."""
        if len(data) <= MAX_LINE:
            if reason:  # commit the reset even though no complete line arrived yet
                self.store.commit(state, Batch(Parsed(), new, reason))
            self._check_partial(state, data)
            return True
        end = _find_newline(path, new.offset + len(data))
        if end is None:
            return True  # still being written; decide once its newline arrives
        problem = Problem(new.offset, "error", f"line is {end - new.offset} bytes, over the "
                          "1 MiB limit", excerpt(data))
        new.offset, new.lines = end + 1, new.lines + 1
        self.store.commit(state, Batch(Parsed(problems=[problem]), new, reason))
        return False

    def _check_partial(self, state: FileState, rest: bytes) -> None:
        """Report an unfinished last line once it has waited too long for its newline."""
        if not rest:
            self._partial.pop(state.path, None)
            return
        offset, since = self._partial.get(state.path, (None, 0.0))
        if offset != state.offset:
            self._partial[state.path] = (state.offset, time.monotonic())
            return
        waited = time.monotonic() - since
        if waited < self.settings.partial_line_timeout or state.partial_reported == offset:
            return
        new = copy.copy(state)
        new.partial_reported = offset
        problem = Problem(offset, "error", f"unfinished line: no newline after {waited:.0f} s "
                          "(writer crashed?); it is read if it is ever completed", excerpt(rest))
        self.store.commit(state, Batch(Parsed(problems=[problem]), new))

    def _read_meta(self, state: FileState, new: FileState, info, path: Path) -> bool:
        if info.st_size == state.size and info.st_mtime == state.mtime:
            return True
        new.size = new.offset = info.st_size
        try:
            meta = json.loads(path.read_bytes())
            if not isinstance(meta, dict):
                raise ValueError("run.json must hold a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            problem = Problem(0, "error", f"run.json is not usable: {exc}", "")
            self.store.commit(state, Batch(Parsed(problems=[problem]), new))
            return True
        except OSError:
            return False
        self.store.commit(state, Batch(Parsed(), new, meta=meta))
        return True

    def _vanished(self, state: FileState) -> None:
        if state.state == "deleted":
            return
        new = copy.copy(state)
        new.state = "deleted"
        problem = Problem(state.offset, "warning", f"file deleted; {state.offset} of "
                          f"{state.size} bytes had been read")
        self.store.commit(state, Batch(Parsed(problems=[problem]), new))

    def _unreadable(self, state: FileState, new: FileState) -> None:
        if state.state == "unreadable":
            return
        new = copy.copy(state)
        new.state = "unreadable"
        problem = Problem(state.offset, "error", "cannot read the file: permission denied; "
                          "fix its permissions and cliffwatch reads it on the next scan")
        self.store.commit(state, Batch(Parsed(problems=[problem]), new))


def _read(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read(size)


def _head(path: Path, stored: str) -> str | None:
    """The file's first bytes as hex, as many as were stored when it was first read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(stored) // 2).hex()
    except OSError:
        return None


def _find_newline(path: Path, start: int, block: int = 1 << 20) -> int | None:
    with open(path, "rb") as handle:
        handle.seek(start)
        pos = start
        while chunk := handle.read(block):
            found = chunk.find(b"\n")
            if found >= 0:
                return pos + found
            pos += len(chunk)
    return None
