"""The one owner of ingest's write transactions (``Store.transaction``), for the careful
path, the fast path and the batch: one parsed batch (writing.py writes its parts: rows,
events, problems, attempts) with the file's new offset, or a fast path's insert. Either all of
it is committed or none of it, so a crash at any moment leaves every line either ingested once
or still unread; a COMMIT that raised is ``Uncertain``. What a failure means is decided here
too: ``content_error`` (the careful path skips the line), ``smaller`` (the fast path and the
batch hand the bytes to a smaller reading), anything else is retried (retry.py).

The ``FileState`` mirrors one row of the ``files`` table; it is only changed in memory after
the transaction that stores it has committed.

New metric keys get their columns first, in small transactions of their own, up to
``max_metric_columns``; further keys go to the map column ``extra_metrics`` (one warning per
run names them). Column names come from ``columns.py``, and are compared as DuckDB does.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import duckdb

from ..db.database import Database
from ..lazy import LazyModule
from ..settings import REGISTRY
from . import memory, writing
from .columns import OVERFLOW, column_name, fold, is_metric_column
from .filestate import FileState, adopt
from .formats import keymap
from .formats.keymap import KeyMap
from .parse import Parsed, Problem
from .writing import table_of

np = LazyModule("numpy")  # the careful path's; the fast path needs neither
pa = LazyModule("pyarrow")
pc = LazyModule("pyarrow.compute")

log = logging.getLogger("cliffwatch.ingest")
MAX_COLUMNS = next(s.default for s in REGISTRY if s.name == "max_metric_columns")
# ALTER TABLEs per transaction: DuckDB keeps every version of the table's catalog entry until
# commit, so n columns added in one transaction cost memory ~ n^2 outside memory_limit (5,000
# keys: 6.9 GB). Small committed groups keep it flat; an empty column is harmless.
ALTERS_PER_TRANSACTION = 64


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
        self._columns: dict[str, dict[str, str]] = {}  # table -> {folded name: name}
        self._overflow_noted: dict[str, set[str]] = {}  # run -> keys reported as overflowing
        self.keymaps: list[KeyMap] = []  # extra key mappings per run glob (formats/keymap.py)

    def keymap(self, run: str) -> KeyMap | None:
        return keymap.for_run(self.keymaps, run) if self.keymaps else None

    def load_files(self) -> list[FileState]:
        result = self.db.run("ingest/files_load")
        names = [d[0] for d in result.description]
        return [FileState(**dict(zip(names, row, strict=True))) for row in result.fetchall()]

    def add_file(self, run: str, path: str, kind: str) -> FileState:
        params = {"run": run, "path": path, "kind": kind}
        file_id = self.db.run("ingest/file_insert", params).fetchall()[0][0]
        return FileState(file_id, run, path, kind)

    def add_files(self, found: list[tuple[str, str, str]]) -> list[FileState]:
        """``add_file`` for many (run, path, kind) at once: one statement, not one commit per
        file (discovering 1,000 new runs took seconds, one INSERT each)."""
        if not found:
            return []
        runs, paths, kinds = (list(column) for column in zip(*found, strict=True))
        result = self.db.run("ingest/files_insert_batch",
                             {"runs": runs, "paths": paths, "kinds": kinds})
        ids = {path: file_id for file_id, path in result.fetchall()}
        return [FileState(ids[path], run, path, kind) for run, path, kind in found]

    def update_files(self, news: list[FileState]) -> None:
        """``update_file`` for many files of one transaction, in one statement (batch.py).
        Only what a first read sets: ``crlf_reported`` and ``partial_reported`` stay."""
        self.db.run("ingest/files_update_batch", {
            "file_ids": [n.file_id for n in news], "inodes": [n.inode for n in news],
            "sizes": [n.size for n in news], "offsets": [n.offset for n in news],
            "heads": [n.head for n in news], "attempts": [n.attempt for n in news],
            "last_steps": [n.last_step for n in news], "lines": [n.lines for n in news],
            "mtimes": [n.mtime for n in news], "grew_ats": [n.grew_at for n in news],
            "tails": [n.tail for n in news]})

    def commit(self, state: FileState, batch: Batch) -> int:
        """Write the batch; on success copy the new state into ``state``. Returns rows written."""
        noted = self._fit_columns(state, batch)
        rows = self.transaction(lambda cur: (writing.write(self, cur, state, batch),
                                             [(state, batch.new_state)]), [state.path])
        self._overflow_noted.setdefault(state.run, set()).update(noted)
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

    def room(self, table: str) -> int:
        """Metric columns ``table`` may still get under ``max_columns`` (below 0 if the cap
        was lowered since)."""
        return self.max_columns - sum(map(is_metric_column, self.known(table)))

    def fits(self, table: str, names) -> bool:
        """Whether the metric columns among ``names`` that ``table`` lacks fit its room: the
        one column-room check of every path."""
        known = self.known(table)
        return sum(is_metric_column(n) for n in names if fold(n) not in known) \
            <= self.room(table)

    def rollback(self, cur) -> None:
        """Undo the open transaction after a failure (the caller re-raises that failure). If
        the rollback fails too, the cursor may be left in an aborted transaction that fails
        every later statement: drop it, and the next call opens a fresh one."""
        self._columns.clear()  # a rolled-back ALTER TABLE must be seen again
        self.db.rollback(cur)

    def _fit_columns(self, state: FileState, batch: Batch) -> set[str]:
        """Give the batch's new metric keys their columns (committed ahead, in small groups)
        up to ``max_columns``; move the rest into the OVERFLOW map, with one warning per run
        for keys not reported before. Returns the keys reported."""
        rows = batch.parsed.rows
        if rows is None or not rows.num_rows:
            return set()
        if state.kind == "rank":  # the rank a line names is its file's rank (log-format.md)
            rows = batch.parsed.rows = rows.drop_columns(
                [n for n in rows.column_names if fold(n) == fold(column_name("rank"))])
        table = table_of(state.kind)
        known = self.known(table)
        new = [n for n in rows.column_names if fold(n) not in known]
        room = max(0, self.room(table))
        extra = [n for n in new if is_metric_column(n)][room:]
        if extra:
            moved = set(extra)
            new = [n for n in new if n not in moved]
            batch.parsed.rows = rows = overflow(rows, extra)
            if fold(OVERFLOW) not in known:
                new.append(OVERFLOW)
        self.add_columns(table, new)
        unnoted = [n for n in extra if n not in self._overflow_noted.get(state.run, ())]
        if unnoted:
            first = int(np.argmax(rows.column(OVERFLOW).is_valid().to_numpy(
                zero_copy_only=False)))  # the first line that carries one
            offsets = batch.parsed.row_offsets
            offset = offsets[first] if first < len(offsets) else 0
            batch.parsed.problems.append(_overflow_problem(self.max_columns, offset, unnoted))
        return set(unnoted)

    def add_columns(self, table: str, names: list[str]) -> None:
        """Add columns in small transactions of their own (ALTERS_PER_TRANSACTION each),
        committed before the rows."""
        for start in range(0, len(names), ALTERS_PER_TRANSACTION):
            cur = self.db.cursor()
            cur.begin()
            try:
                self.ensure_columns(cur, table, names[start:start + ALTERS_PER_TRANSACTION])
                cur.commit()
            except BaseException:
                self.rollback(cur)
                raise

    def update_file(self, new: FileState) -> None:
        self.db.run("ingest/file_update", {k: v for k, v in dataclasses.asdict(new).items()
                                           if k not in ("run", "path", "kind")})

    def known(self, table: str) -> dict[str, str]:
        """The table's columns: {name folded as DuckDB compares them: name} (cached)."""
        if table not in self._columns:
            result = self.db.run("ingest/table_columns", {"table": table}).fetchall()
            self._columns[table] = {fold(r[0]): r[0] for r in result}
        return self._columns[table]

    def ensure_columns(self, cur, table: str, names: list[str]) -> None:
        known = self.known(table)
        for name in names:
            if fold(name) not in known:
                query = {"buckets": "ingest/add_list_column",
                         OVERFLOW: "ingest/add_overflow_column"}.get(name, "ingest/add_column")
                self.db.run(query, identifiers={"table": table, "column": name})
                known[fold(name)] = name


def overflow(rows: pa.Table, names: list[str]) -> pa.Table:
    """``rows`` with the columns ``names`` moved into the map column OVERFLOW (``{name:
    value}`` of each row's non-NULL ones; NULL when it has none). Cost follows the values
    present, not rows times names: wide logs are often sparse."""
    row_ids, key_ids, values = [], [], []
    index = {name: i for i, name in enumerate(rows.column_names)}  # column(name) scans them
    for i, name in enumerate(names):
        column = rows.column(index[name])
        present = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
        row_ids.append(present)
        key_ids.append(np.full(len(present), i))
        values.append(column.take(present).to_numpy(zero_copy_only=False))
    row_id = np.concatenate(row_ids)
    order = np.argsort(row_id, kind="stable")
    counts = np.bincount(row_id, minlength=rows.num_rows)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32())
    keys = pa.array(names, pa.string()).take(pa.array(np.concatenate(key_ids)[order]))
    items = pa.array(np.concatenate(values)[order], pa.float64())
    extra = pa.MapArray.from_arrays(offsets, keys, items, mask=pa.array(counts == 0))
    moved = set(names)
    kept = rows.select([i for i, name in enumerate(rows.column_names) if name not in moved])
    return kept.append_column(pa.field(OVERFLOW, pa.map_(pa.string(), pa.float64())), extra)


def _overflow_problem(max_columns: int, offset: int, unnoted: list[str]) -> Problem:
    shown = ", ".join(unnoted[:20]) + (f" and {len(unnoted) - 20} more"
                                         if len(unnoted) > 20 else "")
    return Problem(offset, "warning", f"metric column limit reached (max_metric_columns="
                   f"{max_columns}): {len(unnoted)} key(s) kept in the map column "
                   f"{OVERFLOW} (read one as {OVERFLOW}['key']): {shown}; raise "
                   "--max-metric-columns to give new keys their own columns (the cap is "
                   "also at most --memory-limit / 512 KiB: raise both)")
