"""Writing one parsed batch in one transaction: rows, events, problems, attempts, and the
file's new offset. Either all of it is committed or none of it, so a crash at any moment
leaves every line either ingested once or still unread.

The ``FileState`` mirrors one row of the ``files`` table; it is only changed in memory after
the transaction that stores it has committed.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from app.db.database import Database
from app.ingest import bulk
from app.ingest.filestate import FileState
from app.ingest.parse import Parsed, Problem, number, records_table

TABLES = {"metrics": "metric_rows", "rank": "ranks_all"}
STATUSES = {"completed", "failed", "interrupted"}
ATTEMPTS = pa.schema([("run", pa.string()), ("attempt", pa.int32()), ("start_step", pa.int64()),
                      ("prev_step", pa.int64()), ("reason", pa.string()), ("file_id", pa.int32())])


@dataclass
class Batch:
    """What one transaction writes for one file."""

    parsed: Parsed
    new_state: FileState
    reset_reason: str | None = None  # file_truncated | file_replaced: next row starts an attempt
    meta: dict | None = None  # run.json contents


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


class Store:
    def __init__(self, db: Database):
        self.db = db
        self._columns: dict[str, set[str]] = {}
        self._described: set[int] = set()

    def load_files(self) -> list[FileState]:
        result = self.db.run("ingest/files_load")
        names = [d[0] for d in result.description]
        return [FileState(**dict(zip(names, row, strict=True))) for row in result.fetchall()]

    def add_file(self, run: str, path: str, kind: str) -> FileState:
        params = {"run": run, "path": path, "kind": kind}
        file_id = self.db.run("ingest/file_insert", params).fetchall()[0][0]
        return FileState(file_id, run, path, kind)

    def commit(self, state: FileState, batch: Batch) -> int:
        """Write the batch; on success copy the new state into ``state``. Returns rows written."""
        cur = self.db.cursor()
        cur.begin()
        try:
            rows = self._write(cur, state, batch)
            cur.commit()
        except BaseException:
            cur.rollback()
            self._columns.clear()  # a rolled-back ALTER TABLE must be seen again
            raise
        _copy_into(state, batch.new_state)
        return rows

    def _write(self, cur, state: FileState, batch: Batch) -> int:
        new, parsed = batch.new_state, batch.parsed
        rows = 0
        if parsed.rows is not None and parsed.rows.num_rows:
            rows = self._insert_rows(cur, state, batch)
        if parsed.events:
            self._insert_events(cur, state, parsed.events, parsed.problems)
        if parsed.problems:
            self._insert(cur, "ingest/insert_errors", _problems_table(state, parsed.problems))
        if rows or parsed.events:
            self.db.run("ingest/run_touch", {"run": state.run})
        if batch.meta is not None:
            self._store_meta(state.run, batch.meta)
        self._update_file(new)
        return rows

    def _update_file(self, new: FileState) -> None:
        self.db.run("ingest/file_update", {k: v for k, v in dataclasses.asdict(new).items()
                                           if k not in ("run", "path", "kind")})

    def _insert_rows(self, cur, state: FileState, batch: Batch) -> int:
        table_name = TABLES[state.kind]
        rows, starts = with_attempts(batch.parsed.rows, batch.new_state, batch.reset_reason)
        rows = rows.append_column("file_id", pa.repeat(pa.scalar(state.file_id, pa.int32()),
                                                       rows.num_rows))
        if state.kind == "rank":  # metric_rows has no run column: the view joins it from files
            rows = rows.append_column("run", pa.repeat(state.run, rows.num_rows))
            if "log_rank" in rows.column_names:  # the rank a line names is its file's rank
                rows = rows.drop_columns(["log_rank"])
            rows = rows.append_column("rank", pa.repeat(pa.scalar(state.rank, pa.int32()),
                                                        rows.num_rows))
        self._ensure_columns(cur, table_name, rows.column_names)
        query = "ingest/insert_metrics" if state.kind == "metrics" else "ingest/insert_ranks"
        self._insert(cur, query, rows)
        if state.kind == "metrics" and starts:
            self._insert(cur, "ingest/insert_attempts", records_table(
                [dict(s, run=state.run, file_id=state.file_id) for s in starts], ATTEMPTS))
        return rows.num_rows

    def commit_bulk(self, state: FileState, new: FileState, chunk: bulk.Chunk) -> int | None:
        """The fast path in one transaction; None (nothing written) when the chunk must take
        the careful path instead."""
        cur = self.db.cursor()
        if state.file_id not in self._described:
            # a file's first chunk usually brings new keys: add their columns up front rather
            # than paying for a failed insert
            self._described.add(state.file_id)
            self._add_columns(cur, state.kind, chunk)
        for retry in (False, True):
            trial = copy.copy(new)
            cur.begin()
            try:
                rows = self._bulk(cur, state, trial, chunk)
                cur.commit()
            except duckdb.BinderException:
                cur.rollback()  # most likely a key with no column yet
                self._columns.clear()
                if retry or not self._add_columns(cur, state.kind, chunk):
                    return None
                continue
            except (duckdb.Error, _NotClean):
                cur.rollback()
                self._columns.clear()
                return None
            except BaseException:  # e.g. the line count failed: never leave it open
                cur.rollback()
                self._columns.clear()
                raise
            _copy_into(state, trial)
            return rows
        return None

    def _bulk(self, cur, state: FileState, new: FileState, chunk: bulk.Chunk) -> int:
        starts = []
        if new.last_step is None or chunk.first_step <= new.last_step:
            starts.append(_start(new, None, chunk.first_step, new.attempt + 1))
            new.attempt += 1
        params = {"path": str(chunk.path), "attempt": new.attempt, "file_id": state.file_id}
        query = "ingest/insert_direct"
        if state.kind == "rank":
            query = "ingest/insert_direct_ranks"
            params |= {"run": state.run, "rank": state.rank}
        written = self.db.run(query, params).fetchall()[0][0]
        scan = chunk.result()  # the scan ran beside DuckDB's read
        if written != scan.lines or not chunk.still_clean():
            raise _NotClean
        first, last = scan.first_step, scan.last_step
        if not scan.steps:  # a log read whole: its order is checked here, after the insert
            backs, first, last, _ = self.db.run(
                "ingest/check_rising", {"file_id": state.file_id, "attempt": new.attempt},
                identifiers={"table": TABLES[state.kind]}).fetchall()[0]
            first = first if backs == 0 else None
        if first != chunk.first_step:
            raise _NotClean
        new.last_step = int(last)
        if not chunk.scratch:
            new.lines = scan.lines  # a whole file, counted while DuckDB read it
        if state.kind == "metrics" and starts:
            self._insert(cur, "ingest/insert_attempts", records_table(
                [dict(s, run=state.run, file_id=state.file_id) for s in starts], ATTEMPTS))
        self.db.run("ingest/run_touch", {"run": state.run})
        self._update_file(new)
        return scan.lines

    def _add_columns(self, cur, kind: str, chunk: bulk.Chunk) -> bool:
        """Columns for the chunk's new metric keys, committed before its rows (an empty
        column is harmless if the rows then take the careful path); False if there are none
        to add or the chunk cannot even be described."""
        table = TABLES[kind]
        try:
            self._ensure_columns(cur, table, [])
            query = "ingest/chunk_columns"
            described = self.db.run(query, {"path": str(chunk.path)}).fetchall()
        except duckdb.Error:
            return False
        names = bulk.new_columns(described, self._columns[table])
        if not names:
            return False
        cur.begin()
        try:
            self._ensure_columns(cur, table, names)
            cur.commit()
        except BaseException:
            cur.rollback()
            self._columns.clear()
            raise
        return True

    def _ensure_columns(self, cur, table: str, names: list[str]) -> None:
        if table not in self._columns:
            result = self.db.run("ingest/table_columns", {"table": table}).fetchall()
            self._columns[table] = {r[0].lower() for r in result}
        known = self._columns[table]
        for name in names:
            if name.lower() not in known:
                query = "ingest/add_list_column" if name == "buckets" else "ingest/add_column"
                self.db.run(query, identifiers={"table": table, "column": name})
                known.add(name.lower())

    def _insert(self, cur, query: str, table: pa.Table) -> None:
        cur.register("chunk", table)
        try:
            self.db.run(query)
        finally:
            # in an aborted transaction this fails too; the real error is the one to see
            with contextlib.suppress(duckdb.Error):
                cur.unregister("chunk")

    def _insert_events(self, cur, state, events, problems: list[Problem]) -> None:
        records = []
        for offset, obj in events:
            step = obj.get("step")
            if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
                problems.append(Problem(offset, "warning", f"event 'step' is not an integer "
                                        f"({step!r}); stored as NULL"))
                step = None
            kind = str(obj.get("event", "unknown"))
            records.append({"run": state.run, "kind": kind, "step": step,
                            "elapsed_s": number(obj.get("elapsed_s")),
                            "time": number(obj.get("time")), "data": json.dumps(obj),
                            "file_id": state.file_id, "offset": offset})
            self._apply_status(state.run, kind, obj)
        schema = pa.schema([("run", pa.string()), ("kind", pa.string()), ("step", pa.int64()),
                            ("elapsed_s", pa.float64()), ("time", pa.float64()),
                            ("data", pa.string()), ("file_id", pa.int32()),
                            ("offset", pa.uint64())])
        self._insert(cur, "ingest/insert_events", records_table(records, schema))

    def _apply_status(self, run: str, kind: str, obj: dict) -> None:
        if kind == "run_start":
            self.db.run("ingest/run_touch", {"run": run})
            self.db.run("ingest/run_status", {"run": run, "status": "running"})
        elif kind == "run_end":
            status = obj.get("status") if obj.get("status") in STATUSES else "completed"
            self.db.run("ingest/run_touch", {"run": run})
            self.db.run("ingest/run_status", {"run": run, "status": status})

    def _store_meta(self, run: str, meta: dict) -> None:
        def integer(key):
            value = meta.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        self.db.run("ingest/run_meta", {"run": run, "meta": json.dumps(meta),
                                        "steps_per_epoch": integer("steps_per_epoch"),
                                        "world_size": integer("world_size")})


def with_attempts(rows: pa.Table, state: FileState,
                  reset_reason: str | None) -> tuple[pa.Table, list[dict]]:
    """Number each row's attempt (a step <= the previous one starts a new attempt) and move
    ``state`` (the file's state being built for this batch) past the rows."""
    steps = rows.column("step").to_numpy()
    prev = np.empty_like(steps)
    prev[1:] = steps[:-1]
    prev[0] = state.last_step if state.last_step is not None else 0
    starts_mask = steps <= prev
    if state.last_step is None:
        starts_mask[0] = True
    attempts = state.attempt + np.cumsum(starts_mask, dtype=np.int64)
    starts = []
    for i in np.flatnonzero(starts_mask):
        if i == 0:
            starts.append(_start(state, reset_reason, int(steps[0]), int(attempts[0])))
        else:
            starts.append({"attempt": int(attempts[i]), "start_step": int(steps[i]),
                           "prev_step": int(prev[i]), "reason": "step_back"})
    state.attempt = int(attempts[-1])
    state.last_step = int(steps[-1])
    return rows.append_column("attempt", pa.array(attempts, pa.int32())), starts


class _NotClean(Exception):
    """The fast path read a different number of lines than the chunk holds."""


def _copy_into(state: FileState, new: FileState) -> None:
    for field in dataclasses.fields(FileState):
        setattr(state, field.name, getattr(new, field.name))


def _start(state: FileState, reset_reason: str | None, first_step: int,
           attempt: int | None = None) -> dict:
    """The attempt that begins at a batch's first row; ``state`` holds the file's position
    before that row."""
    reason = "step_back" if state.last_step is not None else (reset_reason or "start")
    return {"attempt": attempt if attempt is not None else state.attempt,
            "start_step": first_step, "prev_step": state.last_step, "reason": reason}


def _problems_table(state: FileState, problems: list[Problem]) -> pa.Table:
    return records_table(
        [{"run": state.run, "file": state.path, "offset": p.offset, "severity": p.severity,
          "reason": p.reason, "excerpt": p.excerpt} for p in problems],
        schema=pa.schema([("run", pa.string()), ("file", pa.string()), ("offset", pa.uint64()),
                          ("severity", pa.string()), ("reason", pa.string()),
                          ("excerpt", pa.string())]))
