"""Read-only SQL for users, shared by the HTTP API, the CLI and the dashboard.

Locks, each meant to hold when another is fooled:

1. The statement must parse, in DuckDB's own parser, as one plain read; an EXPLAIN is taken
   apart and the statement inside must be one too (``app/db/statement.py``). What runs is
   rebuilt from the checked read, so ``EXPLAIN ANALYZE COPY ... TO`` or ``EXPLAIN ANALYZE SET``
   never reaches DuckDB.
2. Every function it names, read from DuckDB's parse tree, must be an allowed table function
   and no function that runs SQL of its own or changes state (``app/db/functions.py``): the
   plan check cannot see inside ``json_execute_serialized_sql``, which once ran a DELETE on
   its own connection, outside the read-only transaction. No function that reads a file,
   no table named like a file (``FROM 'x.csv'``), nothing that names a path.
3. Before it runs, DuckDB plans the read (``EXPLAIN (FORMAT json)``, which executes nothing)
   and a plan holding any operator that writes, copies, sets, attaches or loads is refused
   (``check_plan``): this holds even if the parser's verdict were wrong.
4. It runs inside ``BEGIN TRANSACTION READ ONLY`` (which stops ``WITH x AS (DELETE ...)
   SELECT``, a statement that parses as a SELECT). If that BEGIN fails the query is refused;
   only the closing ROLLBACK may fail quietly.
5. The configuration is locked once the database is open (``lock_configuration``, see
   ``Database``): no SET, RESET or PRAGMA can change the memory limit, threads, allowed
   directories or external access of the server, whatever statement carries it.
6. File access outside ingest's scratch space is off for the whole database: DuckDB cannot
   read or write the logs or the rest of the database folder (ingest hands it copies, never
   a log's path). DuckDB 2.0 has no read-only ``allowed_directories`` and a read-only
   transaction does not stop COPY TO, which is why. DuckDB still reaches the database file,
   its WAL files and its temp folder (it allows them itself): locks 1 to 3 keep ad-hoc SQL
   from them.

Results stop at ``max_rows`` rows or ``max_bytes`` bytes, whichever comes first. They arrive
as Arrow batches that DuckDB fills without the GIL, and are measured in Arrow bytes before any
value becomes a Python object, so a 300 MB list is refused as 300 MB, not built as 40 million
Python ints; a slow query is interrupted after the time limit::

    run_readonly(cursor, "SELECT step, loss FROM metrics", max_rows=10_000, time_limit=10)
    -> SqlResult(columns=["step", "loss"], rows=[...], truncated=None, ...)
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import math
import threading
import time
import uuid
from dataclasses import dataclass

import duckdb
import orjson
import pyarrow as pa

from ..command import COMMAND
from ..errors import CliffwatchError
from ..ingest.memory import limit_bytes
from ..settings import Settings
from . import queries
from .functions import check_functions, check_scans
from .loss import damaged, invalidated, loss_cause, rebuild_advice
from .statement import read_statement

# rows per Arrow batch: small enough that a batch of 10 MB strings is not copied whole past
# the cap, big enough that 10,000 small rows cost milliseconds (measured once by hand:
# 0.008 s at 64 rows a batch, 0.46 s at 1)
_BATCH_ROWS = 32
# one in-memory DuckDB per thread, to turn kept Arrow rows into Python values
_SCRATCH = threading.local()
# Ad-hoc queries are stopped once DuckDB as a whole holds more than this share of its memory
# limit in memory it cannot spill (aggregate states: list(), string_agg(); tag ALLOCATOR).
# The rest stays for ingest's writes and, above all, their rollbacks: a rollback that cannot
# pin a block invalidates the database (issue 18, finding 6: two loops of `len(list(random()))`
# over 30 M rows did, in 4 of 6 runs at 256MB). Sorts, joins and hash tables are not counted:
# DuckDB spills them (to --max-temp-size) when a write needs the room. No DuckDB setting caps
# one connection's memory (operator_memory_limit bounds sorts and hash tables, not list()).
ADHOC_MEMORY_SHARE = 1 / 2
GUARD_S = 0.02  # how often the guard looks at a running query's memory (0.3 ms a look)
# integers orjson writes as numbers: int64 and uint64
_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1
# physical operators (DuckDB 2.0 names, as EXPLAIN shows them) that change a file, the
# database, a setting or the session; a read never needs one
WRITING_OPERATORS = frozenset({
    "COPY_TO_FILE", "BATCH_COPY_TO_FILE", "FIXED_BATCH_COPY_TO_FILE", "COPY_DATABASE",
    "INSERT", "BATCH_INSERT", "DELETE", "UPDATE", "MERGE_INTO", "CREATE_TABLE",
    "CREATE_TABLE_AS", "BATCH_CREATE_TABLE_AS", "CREATE_INDEX", "ALTER", "CREATE_SEQUENCE",
    "CREATE_VIEW", "CREATE_SCHEMA", "CREATE_MACRO", "CREATE_TYPE", "CREATE_SECRET", "DROP",
    "TRANSACTION", "VACUUM", "CHECKPOINT", "FORCE_CHECKPOINT", "SET", "SET_VARIABLE", "RESET",
    "LOAD", "PREPARE", "EXECUTE", "ATTACH", "DETACH", "EXPORT", "PRAGMA", "EXTENSION",
    "UPDATE_EXTENSIONS",
})


@dataclass
class SqlResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    truncated: str | None  # None, or why the rows stop short: "rows" or "bytes"
    elapsed_s: float
    limit: int = 0  # the cap that cut it: max_rows or max_bytes

    def to_json(self) -> dict:
        return {"columns": self.columns, "types": self.types,
                "rows": [[jsonable(v) for v in row] for row in self.rows],
                "row_count": len(self.rows), "truncated": self.truncated is not None,
                "truncated_reason": self.truncation_message(),
                "elapsed_s": round(self.elapsed_s, 4)}

    def truncation_message(self) -> str | None:
        if self.truncated == "rows":
            return (f"stopped at {self.limit} rows; add LIMIT or raise --sql-max-rows")
        if self.truncated == "bytes" and not self.rows:
            return (f"no rows: the first row alone is over {self.limit} bytes; select smaller "
                    "values (len(), a slice, LIMIT inside the list) or raise --sql-max-bytes")
        if self.truncated == "bytes":
            return (f"stopped at {len(self.rows)} rows, the result passed {self.limit} bytes; "
                    "select fewer or smaller columns or raise --sql-max-bytes")
        return None


def check_plan(cursor, read: str, params: dict | None = None) -> None:
    """Refuse ``read`` if DuckDB's plan for it holds an operator that writes, or one that
    reads a file or shows a path (``check_scans``: a view such as pragma_database_list calls
    duckdb_databases() out of the parse tree's sight). EXPLAIN plans and executes nothing,
    whatever the statement."""
    plan = cursor.execute(f"EXPLAIN (FORMAT json) {read}", params).fetchall()
    found = set()
    pending = [node for _, text in plan for node in orjson.loads(text)]
    while pending:
        node = pending.pop()
        found.add(node.get("name"))
        pending.extend(node.get("children", []))
    writes = sorted(found & WRITING_OPERATORS)
    if writes:
        raise CliffwatchError(f"only read queries are allowed; this one would run "
                              f"{', '.join(writes)}", status=403)
    check_scans(found - {None})


def run_readonly(cursor: duckdb.DuckDBPyConnection, sql: str, *, params: dict | None = None,
                 max_rows: int, time_limit: float,
                 max_bytes: int = Settings.sql_max_bytes) -> SqlResult:
    statement = read_statement(sql)
    started = time.perf_counter()
    guard = _Guard(cursor, time_limit)
    _begin_read_only(cursor)
    reader = None
    try:
        with guard:
            check_functions(cursor, statement.read)
            check_plan(cursor, statement.read, params)
            relation = cursor.sql(statement.run, params=params)
            columns, types = relation.columns, [str(t) for t in relation.types]
            reader = relation.to_arrow_reader(_BATCH_ROWS)
            kept, truncated = _fetch(reader, max_rows, max_bytes)
    except (duckdb.Error, OSError) as exc:  # pyarrow reports DuckDB's errors as OSError
        interrupted = isinstance(exc, duckdb.InterruptException) or "INTERRUPT Error" in str(exc)
        if interrupted and guard.over_memory is not None:  # else its own error says more
            raise CliffwatchError(_memory_message(*guard.over_memory)) from None
        if interrupted:
            raise CliffwatchError(f"query exceeded {time_limit:g} s and was stopped; raise "
                                  "--sql-time-limit or narrow the query (WHERE run = ...)",
                                  status=408) from None
        raise CliffwatchError(_describe(exc, params), status=_status(exc)) from None
    finally:
        if reader is not None:
            reader.close()  # the cursor refuses the ROLLBACK while a result is open
        _rollback(cursor)
    return SqlResult(columns, types, _python_rows(kept), truncated,
                     time.perf_counter() - started,
                     {"rows": max_rows, "bytes": max_bytes}.get(truncated, 0))


def _fetch(reader, max_rows: int, max_bytes: int) -> tuple[pa.Table, str | None]:
    """The rows kept, as Arrow, until the result ends or a cap is passed. Sizes are Arrow's
    buffer sizes, measured before any value becomes a Python object: a 300 MB list is
    refused as 300 MB of Arrow, never built as 40 million Python ints holding the GIL."""
    kept, size, count = [], 0, 0
    for batch in reader:  # DuckDB fills each batch without holding the GIL
        part = batch.slice(0, max_rows - count)
        if size + part.nbytes > max_bytes:
            fit = 0
            while fit < part.num_rows and size + part.slice(fit, 1).nbytes <= max_bytes:
                size, fit = size + part.slice(fit, 1).nbytes, fit + 1
            kept.append(part.slice(0, fit))
            return _table(kept, reader), "bytes"
        kept.append(part)
        size, count = size + part.nbytes, count + part.num_rows
        if part.num_rows < batch.num_rows:
            return _table(kept, reader), "rows"
    return _table(kept, reader), None


def _table(batches, reader) -> pa.Table:
    return pa.Table.from_batches(batches, schema=reader.schema)


def _python_rows(table: pa.Table) -> list[tuple]:
    """The kept rows as the Python values DuckDB itself returns (pyarrow's own conversion
    differs: dates past year 9999 raise, UHUGEINT does not exist), converted by a scratch
    in-memory DuckDB that runs no user SQL."""
    if table.num_rows == 0:
        return []
    scratch = getattr(_SCRATCH, "con", None)
    if scratch is None:
        scratch = _SCRATCH.con = duckdb.connect()
    return scratch.from_arrow(table).fetchall()


def _begin_read_only(cursor) -> None:
    """Open the read-only transaction, or refuse: a query that ran without it could write
    (on a cursor left inside a read-write transaction, BEGIN fails)."""
    try:
        queries.execute(cursor, "db/begin_read_only")
    except duckdb.Error as exc:
        _rollback(cursor)  # so the next query on this cursor starts clean
        if isinstance(exc, duckdb.FatalException):  # sending it again will not help
            raise CliffwatchError(_describe(exc), status=503) from None
        raise CliffwatchError(f"could not start a read-only transaction ({_describe(exc)}); "
                              "the query was not run, send it again", status=503) from None


class _Guard:
    """Interrupts the cursor if the block runs past the time limit, or once DuckDB holds more
    than ``ADHOC_MEMORY_SHARE`` of its memory limit in memory it cannot spill (``over_memory``
    then says how much), and never afterwards (an interrupt sent to an idle connection would
    hit its next query). The memory is read through a cursor of its own: DuckDB refuses a
    second call on a busy one."""

    def __init__(self, cursor, limit: float):
        self.cursor, self.limit, self.lock, self.active = cursor, limit, threading.Lock(), False
        self.over_memory: tuple[int, str] | None = None  # (bytes held, the limit as shown)
        self.done = threading.Event()
        self.probe = None
        self.thread = threading.Thread(target=self._watch, name="cliffwatch-sql-guard",
                                       daemon=True)

    def _watch(self) -> None:
        deadline = time.monotonic() + self.limit
        try:
            start = _memory_look(self.probe)  # what others hold: the pace is this query's
            before = None if start is None else start[0]
            while not self.done.wait(max(0.0, min(GUARD_S, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    self._stop()
                    return
                look = _memory_look(self.probe)
                if look is None:
                    continue
                held, cap, shown = look
                # where it will be at the next look, at the pace since the last one: with many
                # threads a list() grows by more than the share in one interval
                pace = 0 if before is None else max(0, held - before)
                if held + pace > ADHOC_MEMORY_SHARE * cap:
                    self.over_memory = (held, shown)
                    self._stop()
                    return
                before = held
        finally:
            with contextlib.suppress(duckdb.Error):
                self.probe.close()

    def _stop(self) -> None:
        with self.lock:
            if self.active:
                self.cursor.interrupt()

    def __enter__(self):
        self.probe = self.cursor.cursor()
        self.active = True
        self.thread.start()

    def __exit__(self, *exc):
        with self.lock:
            self.active = False
        self.done.set()
        self.thread.join()  # at most one look more: its cursor is closed before the database


def _memory_look(probe) -> tuple[int, int, str] | None:
    """(bytes DuckDB holds that it cannot spill, its limit in bytes, the limit as shown), or
    None when it cannot say."""
    try:
        held, shown = queries.execute(probe, "db/memory_use").fetchone()
    except duckdb.Error:
        # out of memory (what cannot be spilled was looked at before it got there: spilling
        # itself is failing, and the query's own error says why), closed, or invalidated
        return None
    cap = limit_bytes(shown.replace(" ", ""))
    return (held, cap, shown) if cap else None


def _memory_message(used: int, limit: str) -> str:
    return (f"query stopped: it made the monitor's database hold {used / 2**20:.1f} MiB of its "
            f"{limit} (--memory-limit) in values it cannot spill to disk (list(), "
            "string_agg(), ...), and ad-hoc queries may take only half, so that ingest and "
            "alerts always have room; narrow the query (WHERE run = ..., fewer rows into list() "
            "or string_agg()) or raise --memory-limit")


def _rollback(cursor) -> None:
    # the one forgiving step: a rollback with no transaction open (the query failed before
    # DuckDB began one, or an interrupt ended it) is fine; and a rollback that fails for
    # another reason must not hide the error being reported (a database DuckDB invalidated
    # after a failed write answers every statement, this one too, with a FatalException)
    with contextlib.suppress(duckdb.Error):
        queries.execute(cursor, "db/rollback")


def _status(exc: duckdb.Error) -> int:
    text = str(exc)
    if invalidated(exc) or _reopened(exc):
        return 503  # the database is being opened again: the same query will run
    refused = ("read-only" in text or "Permission" in text
               or "configuration has been locked" in text)
    return 403 if refused else 400


def _describe(exc: Exception, params: dict | None = None) -> str:
    text = str(exc).strip()
    if invalidated(exc):
        return (f"{loss_cause(exc)}; it is being opened again by itself: send the query again "
                "in a few seconds (nothing stored is lost)")
    if _reopened(exc):
        return "the database was opened again while this query ran; send it again"
    if damaged(exc):
        return f"{text.split(chr(10))[0]}: {rebuild_advice()}"
    if "max_temp_directory_size" in text:
        return ("this query needs more spill space on disk than --max-temp-size allows; narrow "
                "the query (WHERE run = ..., LIMIT) or raise --max-temp-size")
    if "read-only" in text:
        return "this query tries to write; only read queries are allowed"
    if "configuration has been locked" in text:
        return "settings cannot be changed while the monitor runs; pass them as flags to serve"
    if "file system operations are disabled" in text or "Permission Error" in text:
        return ("this query reaches a file, and DuckDB refused it; ad-hoc SQL reads the tables "
                "ingest filled (SHOW TABLES lists them), never files")
    if "$metric" in text and "empty set of columns" in text and params:
        # a named query's COLUMNS(lambda c: c = $metric) found no such column; the raw Binder
        # error would list every column of the view
        run = params.get("run")
        return (f"run {run!r} has no metric {params.get('metric')!r} (names match exactly, "
                f"case included); list its metrics with `{COMMAND} sql --query run_columns "
                f"--param run={run}`")
    return text.split("\n\n")[0]


def _reopened(exc: Exception) -> bool:
    # the query's cursor was closed with the invalidated connection it came from
    return isinstance(exc, duckdb.ConnectionException) and "closed" in str(exc)


def jsonable(value):
    """A JSON-safe value: NaN and infinities become the strings "NaN", "Infinity",
    "-Infinity" (browsers cannot parse the bare literals), times become ISO strings, and an
    integer outside the 64-bit range (HUGEINT, UHUGEINT, BIGNUM, sum(hash(...))) becomes its
    decimal string: JSON encoders refuse it and JavaScript would round it anyway."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _UINT_MAX else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value
