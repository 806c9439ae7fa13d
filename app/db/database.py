"""The DuckDB file: opening it (with a clear message when another process holds it),
migrations, and one cursor per thread.

DuckDB allows one process to open a file for writing and no other process to read it at the
same time, so the server opens it once and every thread works through its own cursor.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from pathlib import Path

import duckdb

from ..command import COMMAND
from ..errors import CliffwatchError
from . import queries

log = logging.getLogger("cliffwatch.db")
_LOCK_PID = re.compile(r"PID (\d+)")


class Database:
    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        allowed_dirs: list[str] | tuple[str, ...] = (),
        memory_limit: str = "256MB",
        wait_s: float = 10.0,
    ):
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise CliffwatchError(
                f"no database at {self.path}; run `{COMMAND} ingest --logdir DIR --once` "
                f"or start `{COMMAND} serve --logdir DIR` first"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = _connect(self.path, read_only, wait_s)
        queries.execute(self.con, "db/memory_limit", {"limit": memory_limit})
        queries.execute(self.con, "db/allocator_background_threads")
        if not read_only:
            migrate(self.con)
        _lock_down(self.con, allowed_dirs)
        self._local = threading.local()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (DuckDB connections must not be shared between threads)."""
        self._retire_set_aside()
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._local.cursor = self.con.cursor()
        return cur

    def reset_cursor(self) -> None:
        """Give this thread a fresh cursor (after a failed rollback the old one may sit in an
        aborted transaction). The old one is set aside, not closed: with DuckDB 2.0.0, closing
        a cursor whose rollback failed crashed the process at the next BEGIN (3 of 3 runs of a
        stress loop); rolled back again later and then closed, it never did."""
        cur = getattr(self._local, "cursor", None)
        self._local.cursor = None
        if cur is not None:
            self._local.aside = [*getattr(self._local, "aside", []), cur]

    def rollback(self, cur) -> None:
        """Undo ``cur``'s open transaction after a failure (the caller re-raises that failure).
        If the rollback fails too, the cursor may sit in an aborted transaction that fails
        every later statement: this thread gets a fresh one (``reset_cursor``)."""
        try:
            cur.rollback()
        except Exception:
            log.warning("rollback failed; opening a fresh database cursor", exc_info=True)
            self.reset_cursor()

    def _retire_set_aside(self) -> None:
        for cur in list(getattr(self._local, "aside", ())):
            try:
                cur.rollback()
            except duckdb.TransactionException as exc:
                if "no transaction is active" not in str(exc).lower():
                    continue  # still busy: try again at the next cursor() call
            except duckdb.Error:
                continue
            self._local.aside.remove(cur)
            with contextlib.suppress(duckdb.Error):
                cur.close()

    def run(self, name: str, params: dict | None = None, identifiers: dict | None = None):
        """Run a named query on this thread's cursor; returns the DuckDB result."""
        return queries.execute(self.cursor(), name, params, identifiers)

    def close(self) -> None:
        self.con.close()


def _connect(path: Path, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise CliffwatchError(f"cannot open database {path}: {exc}") from None
            if time.monotonic() >= deadline:
                raise CliffwatchError(_lock_message(path, str(exc))) from None
            time.sleep(0.2)


def _lock_message(path: Path, detail: str) -> str:
    pid = _LOCK_PID.search(detail)
    holder = f"process {pid.group(1)}" if pid else "another process"
    return (
        f"database {path} is held by {holder}. If that is a cliffwatch server, run the command "
        f"with --logdir so it talks to the server over HTTP; otherwise stop that process or "
        f"pass --db with another file."
    )


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations not yet recorded, all in one transaction (a new database costs one
    commit, not one per migration); returns their names."""
    queries.execute(con, "db/migrations_table")
    done = {row[0] for row in queries.execute(con, "db/migrations_done").fetchall()}
    pending = [(name, sql) for name, sql in queries.migrations() if name not in done]
    if not pending:
        return []
    con.execute("BEGIN TRANSACTION")
    try:
        for name, sql in pending:
            con.execute(sql)
            queries.execute(con, "db/migration_record", {"name": name})
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")  # none applied: the next start tries them all again
        raise
    return [name for name, _ in pending]


def _lock_down(con: duckdb.DuckDBPyConnection, allowed_dirs) -> None:
    """No file access outside ``allowed_dirs`` (the server passes its scratch space alone),
    then no more SET, for every cursor.

    Ad-hoc SQL runs through cursors of this connection; with external access off, a query
    cannot read /etc/passwd or write files outside these folders. Arrow tables must then be
    register()ed by name. With the configuration locked, nothing (``SET memory_limit``,
    ``threads``, ``enable_external_access``, ``lock_configuration`` itself) can be changed
    again: nothing the app runs after this point SETs anything, so any SET is an attack.
    """
    dirs = [str(Path(d).resolve()) + "/" for d in allowed_dirs]
    queries.execute(con, "db/allow_dirs", {"dirs": dirs})
    queries.execute(con, "db/disable_external_access")
    queries.execute(con, "db/arrow_lossless_conversion")  # ad-hoc results go through Arrow
    queries.execute(con, "db/lock_configuration")
