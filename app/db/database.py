"""The DuckDB file: opening it (with a clear message when another process holds it or the file
is damaged), migrations, one cursor per thread, and opening it again when DuckDB gives up on it.

DuckDB allows one process to open a file for writing and no other process to read it at the
same time, so the server opens it once and every thread works through its own cursor.

DuckDB invalidates a database after a failure it cannot undo (a checkpoint that ran out of
memory or disk, a rollback that could not pin a block): from then on every statement on every
cursor fails with a FatalException. ``keep()`` starts a thread that notices (a probe a second,
sooner when a worker calls ``suspect(exc)``), closes the connection and opens the file again,
migrations and lock-down included. Nothing committed is lost (DuckDB replays its WAL), every
thread gets a fresh cursor (``generation`` counts the openings) and each worker reloads what it
keeps in memory from the tables. Until the file is open again ``cursor()`` raises
``DatabaseLost``, whose message is what /api/health shows::

    the database was invalidated by DuckDB after a write found no disk space (IOException:
    Could not write file ".../cliffwatch.duckdb": No space left on device): the disk holding
    /data/runs/.cliffwatch has 0 B free of 8.0 GiB; free space there; it reopens by itself ...
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
import time
import weakref
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from ..command import COMMAND
from ..errors import CliffwatchError
from . import queries
from .loss import (
    REBUILD_LOSES,
    Lost,
    damaged,
    disk_room,
    free_space,
    invalidated,
    loss_cause,
    no_space,
    rebuild_advice,
)

log = logging.getLogger("cliffwatch.db")
_LOCK_PID = re.compile(r"PID (\d+)")
PROBE_S = 1.0  # the keeper's look when no worker reported anything
REOPEN_MAX_S = 16.0  # longest wait between two reopenings of one episode
QUIET_S = 60.0  # invalidated again this soon after a reopening: the same episode, not logged
CLOSE_WAIT_S = 0.02  # between tries to close a connection a thread is still inside
class DatabaseLost(CliffwatchError):
    """The database is being opened again after DuckDB invalidated it (status 503)."""

    def __init__(self, message: str):
        super().__init__(message, status=503)


class DatabaseHeld(CliffwatchError):
    """Another process holds the file (DuckDB lets one process open it). ``holder`` is its pid
    when DuckDB names it: a caller decides on the type and the pid, never on the message."""

    def __init__(self, path: Path, holder: int | None, message: str | None = None):
        self.path, self.holder = Path(path), holder
        super().__init__(message or _lock_message(self.path, self.who))

    @property
    def who(self) -> str:
        return f"process {self.holder}" if self.holder else "another process"


class Database:
    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        allowed_dirs: list[str] | tuple[str, ...] = (),
        memory_limit: str = "256MB",
        wait_s: float = 10.0,
        temp_dir: Path | None = None,
        temp_max: str | None = None,
    ):
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise CliffwatchError(
                f"no database at {self.path}; run `{COMMAND} ingest --logdir DIR --once` "
                f"or start `{COMMAND} serve --logdir DIR` first"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.allowed_dirs, self.memory_limit = list(allowed_dirs), memory_limit
        self.temp_dir, self.temp_max = temp_dir, temp_max
        self.generation = 0  # openings after the first: a cursor of an older one is closed
        self.lost: Lost | None = None
        self._local = threading.local()
        self._lock = threading.Lock()  # guards con, generation and lost together
        self._cursors: weakref.WeakSet = weakref.WeakSet()  # interrupted at a reopening
        self._wake, self._closing = threading.Event(), threading.Event()
        self._keeper: threading.Thread | None = None
        self._reopened_at: float | None = None
        self._delay = 0.0  # before the next reopening; grows while reopenings do not hold
        self.con = self._open(wait_s)

    def _open(self, wait_s: float) -> duckdb.DuckDBPyConnection:
        con = _connect(self.path, self.read_only, wait_s)
        try:
            queries.execute(con, "db/memory_limit", {"limit": self.memory_limit})
            queries.execute(con, "db/allocator_background_threads")
            if self.temp_dir is not None:
                queries.execute(con, "db/temp_directory", {"dir": str(self.temp_dir)})
            if self.temp_max:
                queries.execute(con, "db/max_temp_directory_size", {"size": self.temp_max})
            if not self.read_only:
                migrate(con)
            _lock_down(con, self.allowed_dirs)
        except duckdb.Error as exc:
            con.close()
            raise CliffwatchError(unreadable(self.path, exc)) from None
        except BaseException:
            con.close()
            raise
        return con

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (DuckDB connections must not be shared between threads)."""
        local = self._local
        if getattr(local, "generation", None) == self.generation:
            self._retire_set_aside()
            cur = local.cursor
            if cur is not None:
                return cur
        with self._lock:
            if self.lost is not None:
                raise DatabaseLost(self.lost.message())
            if getattr(local, "generation", None) != self.generation:
                local.aside = []  # closed with the connection they came from
            cur = local.cursor = self.con.cursor()
            local.generation = self.generation
            self._cursors.add(cur)
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
        except Exception as exc:
            if invalidated(exc):
                self.suspect(exc)  # the keeper opens the file again: no cursor to set aside
                return
            # one line, no traceback: it comes in bursts under memory pressure
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            log.warning("rollback failed (%s: %s); this thread opens a fresh database cursor",
                        type(exc).__name__, first)
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

    # ---- keeping it open ------------------------------------------------------------------

    def keep(self) -> None:
        """Start the thread that opens the file again whenever DuckDB invalidates it (the
        server and ``ingest`` without --once; a one-shot command just reports and exits)."""
        if self._keeper is not None:
            return
        self._keeper = threading.Thread(target=self._keep, name="cliffwatch-db", daemon=True)
        self._keeper.start()

    def suspect(self, error: BaseException | str | None) -> bool:
        """A worker's statement failed with ``error``: True when that means the database was
        invalidated (then the keeper looks at once instead of at its next probe)."""
        if not invalidated(error):
            return False
        self._wake.set()
        return True

    @property
    def failure(self) -> str | None:
        """One line on the database being opened again, or None while it is open."""
        lost = self.lost
        return None if lost is None else lost.message()

    def _keep(self) -> None:
        while not self._closing.is_set():
            self._wake.wait(PROBE_S)
            self._wake.clear()
            if self._closing.is_set():
                return
            try:
                queries.execute(self.cursor(), "db/probe").fetchall()
            except duckdb.Error as exc:
                if invalidated(exc):
                    self._reopen(exc)
            except CliffwatchError:
                pass  # a reopening under way in this thread cannot be; nothing to do
            if self._reopened_at is not None \
                    and time.monotonic() - self._reopened_at > QUIET_S:
                self._delay, self._reopened_at = 0.0, None  # it held: the episode is over

    def _reopen(self, error: duckdb.Error) -> None:
        """Close the invalidated connection (its cursors with it) and open the file again,
        retrying with a growing pause until it opens or the database is closed."""
        again = self._reopened_at is not None  # invalidated again soon after a reopening
        lost = Lost(time.monotonic(), loss_cause(error, self.path.parent))
        if no_space(error):
            lost.disk, lost.free_at = self.path.parent, (free_space(self.path.parent) or (0, 0))[0]
            lost.tried_at = lost.since
        with self._lock:
            self.lost, old = lost, self.con
            self.generation += 1  # no thread keeps using a cursor of the old connection
        if not again:
            log.error("%s; opening it again", lost.cause)
        self._close(old)
        while not self._closing.wait(self._delay):
            if not lost.room_back():
                self._delay = PROBE_S  # the disk is looked at every second meanwhile
                continue
            self._delay = min(max(1.0, 2 * self._delay), REOPEN_MAX_S)
            lost.tried_at = time.monotonic()
            try:
                con = self._open(wait_s=0.0)
            except Exception as exc:  # the keeper must go on trying
                if not lost.tries:
                    log.warning("cannot open the database again yet (%s); retrying with "
                                "backoff up to %.0f s", exc, REOPEN_MAX_S)
                lost.tries, lost.last_error = lost.tries + 1, str(exc).split("\n")[0][:300]
                continue
            with self._lock:
                if self._closing.is_set():  # close() came meanwhile: it saw the old one
                    con.close()
                    return
                self.con, self.lost = con, None
                self.generation += 1
            if not again:
                log.warning("database open again after %.1f s; every worker resumes from what "
                            "it stored", time.monotonic() - lost.since)
            self._reopened_at = time.monotonic()
            return

    def _close(self, con: duckdb.DuckDBPyConnection, patience_s: float | None = None) -> None:
        """Close ``con``, interrupting the threads still inside a call on one of its cursors
        (DuckDB refuses to close a connection in use, and a statement on an invalidated
        database returns at once or at its next interrupt check); after ``patience_s`` the
        refusal is raised (None: keep trying)."""
        deadline = None if patience_s is None else time.monotonic() + patience_s
        while True:
            try:
                con.close()
                return
            except duckdb.ResourceInUseException:
                if deadline is not None and time.monotonic() > deadline:
                    raise
                for cur in list(self._cursors):
                    with contextlib.suppress(duckdb.Error):
                        cur.interrupt()
                time.sleep(CLOSE_WAIT_S)
            except duckdb.Error:
                return  # closed already

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        if self._keeper is not None:
            self._keeper.join(timeout=10)
        self._close(self.con, patience_s=10.0)


def unreadable(path: Path, exc: BaseException) -> str:
    """What to say when the file opens but cannot be read or set up."""
    first = " ".join(str(exc).split("\n\n")[0].split())[:300]
    if damaged(exc):
        return f"cannot read database {path} ({first}): {rebuild_advice()}"
    if no_space(exc):
        return f"cannot open database {path} ({first}): {disk_room(path.parent)}; free space there"
    return (f"cannot open database {path} ({first}); if the file is damaged, start with "
            f"--rebuild: it moves the file aside and reads the logs again (a rebuild loses "
            f"{REBUILD_LOSES})")


def _connect(path: Path, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise CliffwatchError(unreadable(path, exc)) from None
            if time.monotonic() >= deadline:
                pid = _LOCK_PID.search(str(exc))
                raise DatabaseHeld(path, int(pid.group(1)) if pid else None) from None
            time.sleep(0.2)
        except duckdb.Error as exc:  # a damaged file can fail as a checksum or format error
            raise CliffwatchError(unreadable(path, exc)) from None


def _lock_message(path: Path, who: str) -> str:
    # the commands say more (reach.py: a server is asked over HTTP before the file is opened)
    return (f"database {path} is held by {who}; stop that process, or pass --db with another "
            "file")


def set_aside(path: Path) -> list[Path]:
    """``--rebuild``: move the database file (and its WAL) aside, never deleting them, so the
    next opening starts empty and ingest reads every log again; returns the new names. Refused
    while another process holds the file."""
    path = Path(path)
    if not path.exists():
        return []
    _check_unheld(path)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    moved = []
    for old in (path, path.with_name(path.name + ".wal")):
        if old.exists():
            new = old.with_name(f"{path.name}.corrupt-{stamp}{old.name[len(path.name):]}")
            os.rename(old, new)
            moved.append(new)
    return moved


def _check_unheld(path: Path) -> None:
    """DuckDB holds its file with an fcntl write lock: ask for the same lock, without opening
    the file as a database (which could write to a damaged one)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise CliffwatchError(f"database {path} is in use by another process (a running "
                              "server?); stop it before --rebuild") from None
    finally:
        os.close(fd)  # lets go of the lock too


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
