"""The one owner of ingest's write transactions (``Store.transaction``), for the careful
path, the fast path and the batch: one parsed batch (writing.py writes its parts: rows,
events, problems, attempts) with the file's new offset, or a fast path's insert. Either all of
it is committed or none of it, so a crash at any moment leaves every line either ingested once
or still unread; a COMMIT that raised is ``Uncertain``. What a failure means is decided here
too: ``content_error`` (the careful path skips the line), ``smaller`` (the fast path and the
batch hand the bytes to a smaller reading), anything else is retried (retry.py).

The ``FileState`` mirrors one row of the ``files`` table; it is only changed in memory after
the transaction that stores it has committed.

Many files' batches may share one transaction (``commit``: one tick's appends, a catch-up's
events logs, each written by one statement per table for all of them). Which columns a table
has, and whether new keys fit, is the column room's question (room.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import duckdb

from ..db.database import Database
from ..settings import REGISTRY
from . import memory, writing
from .filestate import FileState, adopt
from .formats import keymap
from .formats.keymap import KeyMap
from .parse import Parsed, Problem
from .room import ColumnRoom

log = logging.getLogger("cliffwatch.ingest")
MAX_COLUMNS = next(s.default for s in REGISTRY if s.name == "max_metric_columns")


@dataclass
class Batch:
    """What one transaction writes for one file."""

    parsed: Parsed
    new_state: FileState
    reset_reason: str | None = None  # file_truncated | file_replaced: next row starts an attempt
    meta: dict | None = None  # run.json contents
    # lines of a rotated file read after the switch (tail.py): numbered after that file's
    # last line (``rotated`` holds its attempt and last step), not after the new file's
    rotated: FileState | None = None


# Errors the database raises because of a line's own content: retrying cannot help, so the
# line is recorded and skipped. Anything else (out of memory, I/O, an interrupted or aborted
# transaction) says nothing about the line: its offset stays put and it is read again later.
CONTENT_ERRORS = (duckdb.ConversionException, duckdb.ConstraintException,
                  duckdb.OutOfRangeException, duckdb.TypeMismatchException,
                  duckdb.InvalidTypeException)


def content_error(exc: BaseException) -> bool:
    """True if ``exc`` is the database refusing a line for what it holds (skip the line);
    False for every other failure (keep the offset and retry)."""
    return isinstance(exc, CONTENT_ERRORS)


def smaller(exc: BaseException) -> bool:
    """The one rule of the fast path and the batch on a failure inside their transaction:
    whether the bytes go to a smaller reading (the careful path, which needs no read_json
    buffer and can skip one line for its content; or half the group). True for a refusal
    (Refused, a database error about the bytes) and for a resource error that less memory
    may avoid (out of memory, I/O): neither is taken for a line's content, since only the
    careful path skips a line, and only for ``content_error``. False, so raised to the
    tailer, for a database DuckDB invalidated (memory.fatal) and for a COMMIT that may have
    committed (Uncertain: the tailer reads the files' rows back before any reading again)."""
    return isinstance(exc, Refused | duckdb.Error | OSError) and not memory.fatal(exc)


class Refused(Exception):
    """A transaction of the fast path or the batch found what the checks before it could not:
    it is rolled back, nothing is written, and the bytes go to a path that reads them in
    smaller pieces (the careful path, or half the group)."""


class Uncertain(Exception):
    """A COMMIT raised: it may still have committed, so reading those bytes again at once
    could store them twice. ``paths``: the files whose rows are read back from ``files``
    (filestate.refresh) before they are read again; the COMMIT's error is ``__cause__``."""

    def __init__(self, paths: list[str]):
        super().__init__(f"a COMMIT raised for {len(paths)} file(s)")
        self.paths = paths


UNBOUND = object()  # an insert named a key with no column: describe the lines and try again


class Store:
    def __init__(self, db: Database, max_columns: int = MAX_COLUMNS):
        self.db = db
        self.max_columns = max_columns  # metric columns per table; more keys go to OVERFLOW
        self.columns = ColumnRoom(db, lambda: self.max_columns)
        self.keymaps: list[KeyMap] = []  # extra key mappings per run glob (formats/keymap.py)

    def keymap(self, run: str) -> KeyMap | None:
        return keymap.for_run(self.keymaps, run) if self.keymaps else None

    def load_files(self) -> list[FileState]:
        result = self.db.run("ingest/files_load")
        names = [d[0] for d in result.description]
        return [FileState(**dict(zip(names, row, strict=True))) for row in result.fetchall()]

    def add_file(self, run: str, path: str, kind: str) -> FileState:
        return self.add_files([(run, path, kind)])[0]

    def add_files(self, found: list[tuple[str, str, str]]) -> list[FileState]:
        """Register many (run, path, kind) at once: one statement, not one commit per file
        (discovering 1,000 new runs took seconds, one INSERT each)."""
        if not found:
            return []
        runs, paths, kinds = (list(column) for column in zip(*found, strict=True))
        result = self.db.run("ingest/files_insert_batch",
                             {"runs": runs, "paths": paths, "kinds": kinds})
        ids = {path: file_id for file_id, path in result.fetchall()}
        return [FileState(ids[path], run, path, kind) for run, path, kind in found]

    def update_files(self, news: list[FileState]) -> None:
        """Store the files' new rows, in one statement for all (inside their transaction)."""
        self.db.run("ingest/files_update_batch", {
            "file_ids": [n.file_id for n in news], "inodes": [n.inode for n in news],
            "sizes": [n.size for n in news], "offsets": [n.offset for n in news],
            "heads": [n.head for n in news], "attempts": [n.attempt for n in news],
            "last_steps": [n.last_step for n in news], "lines": [n.lines for n in news],
            "mtimes": [n.mtime for n in news], "grew_ats": [n.grew_at for n in news],
            "states": [n.state for n in news], "crlfs": [n.crlf_reported for n in news],
            "partials": [n.partial_reported for n in news], "tails": [n.tail for n in news],
            "writers": [n.writers for n in news]})

    def commit(self, state: FileState, batch: Batch) -> int:
        """Write the batch; on success copy the new state into ``state``. Returns rows written."""
        return self.commit_many([(state, batch)])

    def commit_many(self, batches: list[tuple[FileState, Batch]]) -> int:
        """Write many files' batches in one transaction (each file once); on success each
        ``state`` becomes its batch's new state. Returns rows written."""
        reporting: dict[str, set[str]] = {}  # run -> overflowing keys this commit reports
        for state, batch in batches:
            reporting.setdefault(state.run, set()).update(
                self.columns.fit(state, batch, reporting.get(state.run, set())))
        rows = self.transaction(lambda cur: (writing.write(self, cur, batches), [
            (state, batch.new_state) for state, batch in batches]),
            [state.path for state, _ in batches])
        for run, keys in reporting.items():
            self.columns.reported.setdefault(run, set()).update(keys)
        return rows

    def record(self, state: FileState, new: FileState, *problems: Problem,
               reason: str | None = None) -> None:
        """Commit a file's new position or state with these problems and no rows (a note, a
        skip, a reset that brought no line yet)."""
        self.commit(state, Batch(Parsed(problems=list(problems)), new, reason))

    def transaction(self, work, paths: list[str]):
        """The one owner of a write transaction, for the careful path, the fast path and the
        batch alike. ``work(cur)`` returns (result, [(state, new), ...]); after the COMMIT
        each ``state`` becomes its ``new`` (the callers never change a FileState themselves).
        Any failure before it rolls back and is raised as it is (the caller decides: content,
        ``smaller``, UNBOUND); a COMMIT that raises is raised as Uncertain for ``paths``."""
        cur = self.db.cursor()
        cur.begin()
        try:
            result, committed = work(cur)
        except BaseException:
            self.rollback(cur)
            raise
        try:
            cur.commit()
        except BaseException as exc:
            self.rollback(cur)
            raise Uncertain(paths) from exc
        for state, new in committed:
            adopt(state, new)
        return result

    def rollback(self, cur) -> None:
        """Undo the open transaction after a failure (the caller re-raises that failure). If
        the rollback fails too, the cursor may be left in an aborted transaction that fails
        every later statement: drop it, and the next call opens a fresh one."""
        self.columns.forget()  # a rolled-back ALTER TABLE must be seen again
        self.db.rollback(cur)
