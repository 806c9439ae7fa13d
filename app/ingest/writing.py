"""Writing parsed batches inside store.py's transaction: the rows with their attempts, eval
and summary rows, the machine's samples, events (and the run status they set), problems,
run.json, and each file's new position. ``Store.commit_many`` is its one caller; the batches
of many files share the statements that need no file's own columns::

    rows = writing.write(store, cur, [(state, batch), ...])   # inside Store.transaction
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb

from ..lazy import LazyModule
from . import attempts
from .arrays import from_numpy, repeat, to_numpy
from .filestate import FileState
from .parse import INT64, Parsed, Problem, event_text, number, records_table

if TYPE_CHECKING:
    from .store import Batch, Store

np = LazyModule("numpy")
pa = LazyModule("pyarrow")
pc = LazyModule("pyarrow.compute")

TABLES = {"metrics": "metric_rows", "rank": "ranks_all"}  # the fast path's kinds


def table_of(kind: str) -> str:
    """The table a file kind's rows go to: rank files to ranks_all, every other log (ours,
    or another trainer's) to metric_rows."""
    return "ranks_all" if kind == "rank" else "metric_rows"


EVALS = "eval_rows"  # rows kept apart from the training line (formats' eval and summary rows)
STATUSES = {"completed", "failed", "interrupted"}


@dataclass
class _Shared:
    """What the transaction's files write to tables with no file's own columns, written once
    for all of them (a statement per file cost 10,000 events logs over 100 s)."""

    rows: dict[str, list] = field(default_factory=dict)  # insert query -> the files' rows
    starts: list[dict] = field(default_factory=list)  # attempts the rows begin
    events: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # run -> its last status set
    touched: list[str] = field(default_factory=list)  # runs that got a line


def write(store: Store, cur, batches: list[tuple[FileState, Batch]]) -> int:
    """Each file's evals, samples and run.json, then the rows, attempts, events, problems,
    run status and file rows of all of them, one statement each; returns rows written
    (training rows and samples)."""
    written, shared = 0, _Shared()
    for state, batch in batches:
        parsed, rows, attempts_of_rows = batch.parsed, 0, None
        if parsed.rows is not None and parsed.rows.num_rows:
            rows, attempts_of_rows = _rows(store, cur, state, batch, shared)
        if parsed.evals is not None and parsed.evals.num_rows:
            _insert_evals(store, cur, state, batch, attempts_of_rows)
        samples = _insert_system(store, cur, state, parsed)  # not a line: the run is untouched
        status = _events(state, parsed.events, parsed.problems, shared.events)
        if status is not None:
            shared.statuses[state.run] = status
        elif rows or parsed.events or parsed.eval_offsets:
            shared.touched.append(state.run)
        shared.problems += _problem_records(state, parsed.problems)
        if batch.meta is not None:
            _store_meta(store, state.run, batch.meta)
        written += rows + samples
    _write_shared(store, cur, shared)
    store.update_files([batch.new_state for _, batch in batches])
    return written


def _write_shared(store: Store, cur, shared: _Shared) -> None:
    for query, tables in shared.rows.items():
        _insert_all(store, cur, query, tables)
    if shared.starts:
        _insert(store, cur, "ingest/insert_attempts",
                records_table(shared.starts, _attempts_schema()))
    statuses = shared.statuses  # a run's last status decides, as in one file's lines
    if statuses:
        store.db.run("ingest/runs_status_batch", {"runs": list(statuses),
                                                  "statuses": list(statuses.values())})
    if shared.events:
        _insert(store, cur, "ingest/insert_events",
                records_table(shared.events, _events_schema()))
    if shared.problems:
        _insert(store, cur, "ingest/insert_errors",
                records_table(shared.problems, _errors_schema()))
    touch = sorted(set(shared.touched) - statuses.keys())
    if touch:
        store.db.run("ingest/runs_touch_batch", {"runs": touch})


def _insert_all(store: Store, cur, query: str, tables: list) -> None:
    """The files' rows in their order, by one insert when their columns agree in type (a
    key one file lacks is NULL there, as a column its insert does not name)."""
    # a key of two types (not a metric: those are doubles) leaves one insert each
    with contextlib.suppress(pa.ArrowInvalid, pa.ArrowTypeError):
        tables = [pa.concat_tables(tables, promote_options="default")]
    for table in tables:
        _insert(store, cur, query, table)


def _rows(store: Store, cur, state: FileState, batch: Batch, shared: _Shared):
    """The batch's rows with their attempts, for ``shared``'s one insert; returns (rows,
    the attempt of each)."""
    table_name = table_of(state.kind)
    rows = batch.parsed.rows
    steps = to_numpy(rows.column("step"))
    if batch.rotated is not None:
        numbers, starts = attempts.late(steps, batch.rotated, batch.new_state)
    else:
        numbers, starts = attempts.number(steps, batch.new_state, batch.reset_reason,
                                          _floats(rows, "elapsed_s", "time"),
                                          _floats(rows, "epoch") if state.kind not in
                                          TABLES else None)  # the fast path sees no epoch
    rows = rows.append_column("attempt", from_numpy(np.asarray(numbers, np.int32)))
    rows = rows.append_column("file_id", repeat(state.file_id, rows.num_rows))
    if state.kind == "rank":  # metric_rows has no run column: the view joins it from files
        rows = rows.append_column("run", repeat(state.run, rows.num_rows))
        rows = rows.append_column("rank", repeat(state.rank, rows.num_rows))
    store.columns.ensure(cur, table_name, rows.column_names)
    query = "ingest/insert_ranks" if state.kind == "rank" else "ingest/insert_metrics"
    shared.rows.setdefault(query, []).append(rows)
    if state.kind != "rank":
        shared.starts += [dict(s, run=state.run, file_id=state.file_id) for s in starts]
    return rows.num_rows, numbers


def _insert_evals(store: Store, cur, state: FileState, batch: Batch, numbers) -> None:
    """Eval and summary rows, each in the attempt of the training line logged before it
    (the file's current one if none was, in this batch)."""
    parsed = batch.parsed
    before = np.searchsorted(np.array(parsed.row_offsets, dtype=np.int64),
                             np.array(parsed.eval_offsets, dtype=np.int64), "right") - 1
    fallback = max(state.attempt, 1)
    attempt = (np.full(len(before), fallback) if numbers is None
               else np.where(before >= 0, numbers[np.maximum(before, 0)], fallback))
    rows = parsed.evals.append_column("attempt", from_numpy(np.asarray(attempt, np.int32)))
    rows = rows.append_column("file_id", repeat(state.file_id, rows.num_rows))
    store.columns.ensure(cur, EVALS, rows.column_names)
    _insert(store, cur, "ingest/insert_evals", rows)


def _insert_system(store: Store, cur, state: FileState, parsed: Parsed) -> int:
    """system.jsonl's samples and GPU rows, with the file's run; returns samples stored."""
    for query, rows in (("ingest/insert_system_samples", parsed.system),
                        ("ingest/insert_system_gpus", parsed.gpus)):
        if rows is not None and rows.num_rows:
            _insert(store, cur, query, rows.append_column(
                "run", repeat(state.run, rows.num_rows)))
    return 0 if parsed.system is None else parsed.system.num_rows


def _insert(store: Store, cur, query: str, table: pa.Table) -> None:
    cur.register("chunk", table)
    try:
        store.db.run(query)
    finally:
        # in an aborted transaction this fails too; the real error is the one to see
        with contextlib.suppress(duckdb.Error):
            cur.unregister("chunk")


def _events(state: FileState, events, problems: list[Problem], out: list[dict]) -> str | None:
    """The file's events as rows (added to ``out``); returns the status the last of them
    sets (run_start, run_end), or None."""
    status = None
    for offset, obj in events:
        step = obj.get("step")
        if step is not None and not (type(step) is int and INT64[0] <= step <= INT64[1]):
            problems.append(Problem(offset, "warning", f"event 'step' is not an integer "
                                    f"({step!r}); stored as NULL"))
            step = None
        kind = str(obj.get("event", "unknown"))
        out.append({"run": state.run, "kind": kind, "step": step,
                    "elapsed_s": number(obj.get("elapsed_s")),
                    "time": number(obj.get("time")), "data": event_text(obj),
                    "file_id": state.file_id, "offset": offset})
        status = _status_of(kind, obj) or status
    return status


def _events_schema():
    return pa.schema([("run", pa.string()), ("kind", pa.string()), ("step", pa.int64()),
                      ("elapsed_s", pa.float64()), ("time", pa.float64()),
                      ("data", pa.string()), ("file_id", pa.int32()),
                      ("offset", pa.uint64())])


def _store_meta(store: Store, run: str, meta: dict) -> None:
    def integer(key):  # a BIGINT column: a number past it is no count (issue 18)
        value = meta.get(key)
        return value if type(value) is int and INT64[0] <= value <= INT64[1] else None

    store.db.run("ingest/run_meta", {"run": run, "meta": json.dumps(meta),
                                    "steps_per_epoch": integer("steps_per_epoch"),
                                    "world_size": integer("world_size")})


def _status_of(kind: str, obj: dict) -> str | None:
    """The run status an event sets (run_start, run_end), or None."""
    if kind == "run_start":
        return "running"
    if kind == "run_end":
        return obj.get("status") if obj.get("status") in STATUSES else "completed"
    return None


def _problem_records(state: FileState, problems: list[Problem]) -> list[dict]:
    return [{"run": state.run, "file": state.path, "offset": p.offset, "severity": p.severity,
             "reason": p.reason, "excerpt": p.excerpt} for p in problems]


def _errors_schema():
    return pa.schema([("run", pa.string()), ("file", pa.string()), ("offset", pa.uint64()),
                      ("severity", pa.string()), ("reason", pa.string()),
                      ("excerpt", pa.string())])


def _floats(rows: pa.Table, *names: str) -> np.ndarray | None:
    """The first of ``names`` that the rows carry, as floats (NaN where a line has none), each
    later one filling its gaps; None if none is there (the resume signs of attempts.py)."""
    found = [rows.column(n) for n in names if n in rows.column_names]
    if not found:
        return None
    numeric = [c for c in found if pa.types.is_floating(c.type) or pa.types.is_integer(c.type)]
    if not numeric:
        return None
    value = pc.coalesce(*(c.cast(pa.float64()) for c in numeric))
    return to_numpy(value)


def _attempts_schema():
    return pa.schema([("run", pa.string()), ("attempt", pa.int32()), ("start_step", pa.int64()),
                      ("prev_step", pa.int64()), ("reason", pa.string()),
                      ("file_id", pa.int32())])
