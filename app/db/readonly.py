"""Read-only SQL for users, shared by the HTTP API, the CLI and the dashboard.

Two locks, because either alone has a hole: the statement must parse as a read (SELECT or
EXPLAIN: COPY, ATTACH, INSTALL, LOAD, PRAGMA, SET, EXPORT, CALL and all writes are refused),
and it runs inside a read-only transaction (which stops ``WITH x AS (DELETE ...) SELECT``, a
statement that parses as a SELECT). File access outside the log directory is off for the whole
database (see ``Database``). A slow query is interrupted after the time limit::

    run_readonly(cursor, "SELECT step, loss FROM metrics", max_rows=10_000, time_limit=10)
    -> SqlResult(columns=["step", "loss"], rows=[...], truncated=False, ...)
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

from app.db import queries
from app.errors import CliffwatchError

ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


@dataclass
class SqlResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    truncated: bool
    elapsed_s: float

    def to_json(self) -> dict:
        return {"columns": self.columns, "types": self.types,
                "rows": [[jsonable(v) for v in row] for row in self.rows],
                "row_count": len(self.rows), "truncated": self.truncated,
                "elapsed_s": round(self.elapsed_s, 4)}


def check_statement(sql: str) -> str:
    """The single read statement in ``sql``, or a CliffwatchError saying why not."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise CliffwatchError(f"SQL syntax error: {_first_line(exc)}") from None
    if not statements:
        raise CliffwatchError("empty query; write a SELECT statement")
    if len(statements) > 1:
        raise CliffwatchError("send one statement at a time (found "
                              f"{len(statements)} separated by ';')")
    kind = statements[0].type
    if kind not in ALLOWED:
        raise CliffwatchError(f"only read queries are allowed (SELECT, WITH ... SELECT, "
                              f"EXPLAIN), not {kind.name}", status=403)
    return sql


def run_readonly(cursor: duckdb.DuckDBPyConnection, sql: str, *, params: dict | None = None,
                 max_rows: int, time_limit: float) -> SqlResult:
    check_statement(sql)
    started = time.perf_counter()
    guard = _Deadline(cursor, time_limit)
    _run(cursor, "db/begin_read_only")
    try:
        with guard:
            result = cursor.execute(sql, params) if params else cursor.execute(sql)
            rows = result.fetchmany(max_rows + 1)
            description = result.description or []
    except duckdb.InterruptException:
        raise CliffwatchError(f"query exceeded {time_limit:g} s and was stopped; raise "
                              "--sql-time-limit or narrow the query (WHERE run = ...)",
                              status=408) from None
    except duckdb.Error as exc:
        status = 403 if "read-only" in str(exc) or "Permission" in str(exc) else 400
        raise CliffwatchError(_describe(exc), status=status) from None
    finally:
        _run(cursor, "db/rollback")
    return SqlResult([d[0] for d in description], [str(d[1]) for d in description],
                     rows[:max_rows], len(rows) > max_rows, time.perf_counter() - started)


class _Deadline:
    """Interrupts the cursor if the block runs past the limit, and never afterwards (an
    interrupt sent to an idle connection would hit its next query)."""

    def __init__(self, cursor, limit: float):
        self.cursor, self.lock, self.active = cursor, threading.Lock(), False
        self.timer = threading.Timer(limit, self._fire)

    def _fire(self) -> None:
        with self.lock:
            if self.active:
                self.cursor.interrupt()

    def __enter__(self):
        self.active = True
        self.timer.start()

    def __exit__(self, *exc):
        with self.lock:
            self.active = False
        self.timer.cancel()


def _run(cursor, name: str) -> None:
    # a rollback with no transaction open (the query failed to start one) is fine
    with contextlib.suppress(duckdb.TransactionException):
        queries.execute(cursor, name)


def _describe(exc: duckdb.Error) -> str:
    text = str(exc).strip()
    if "read-only" in text:
        return "this query tries to write; only read queries are allowed"
    if "file system operations are disabled" in text or "Permission Error" in text:
        return ("this query reads a file outside the log directory; only the database and the "
                "log directory are readable")
    return text.split("\n\n")[0]


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]


def jsonable(value):
    """A JSON-safe value: NaN and infinities become the strings "NaN", "Infinity",
    "-Infinity" (browsers cannot parse the bare literals), times become ISO strings."""
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
