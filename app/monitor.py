"""Wiring for one log directory: where its database lives, scratch space, the tailer.

    with Monitor.open(Path("runs"), settings) as mon:
        mon.tailer.catch_up()   # discover and read until nothing complete is left
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .db import served
from .db.database import Database, unreadable
from .errors import CliffwatchError
from .ingest.memory import limit_bytes
from .ingest.tail import Tailer
from .scratch import make as make_scratch
from .scratch import sweep as sweep_scratch


def default_db(logdir: Path) -> Path:
    """The database lives inside the log directory, in a folder the scanner skips."""
    return Path(logdir) / ".cliffwatch" / "cliffwatch.duckdb"


def _scratch_dir(db_path: Path) -> Path:
    # tmpfs keeps the fast path's scratch copies off the disk.
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else db_path.parent
    sweep_scratch(base)
    return make_scratch(base)


def _links_dir(db_path: Path) -> Path:
    """A private folder beside the database, usually on the logs' filesystem: whole logs are
    hard-linked into it for DuckDB to read (chunk.whole_file) instead of copied."""
    sweep_scratch(db_path.parent)  # a killed process's links keep only names, never data
    return make_scratch(db_path.parent)


def _spill_dir(db_path: Path) -> Path:
    """A private folder beside the database, on its disk rather than in /dev/shm (memory):
    DuckDB spills there what does not fit in memory_limit."""
    sweep_scratch(db_path.parent)
    return make_scratch(db_path.parent)


def spill_cap(settings, folder: Path) -> str:
    """``max_temp_size``, and never more than half the free space on ``folder``'s disk: a
    spilling query fails with a message before the database's own writes find no room."""
    wanted = limit_bytes(settings.max_temp_size)
    if wanted is None:
        raise CliffwatchError(f"--max-temp-size {settings.max_temp_size!r} is not a size; "
                              "pass e.g. 4GB or 500MB (env CLIFFWATCH_MAX_TEMP_SIZE)")
    return f"{min(wanted, shutil.disk_usage(folder).free // 2)}b"


@dataclass
class Monitor:
    logdir: Path
    db: Database
    tailer: Tailer
    scratch: Path
    links: Path | None = None
    spill: Path | None = None

    @classmethod
    def open(cls, logdir: Path, settings, db_path: Path | None = None,
             link_logs: bool = False, wait_s: float = 10.0) -> Monitor:
        """``link_logs``: DuckDB reads whole logs through hard links in a private folder, not
        copies (``ingest --once``: one process that runs no ad-hoc SQL, so a link DuckDB could
        write through is never in reach of a query; the server keeps reading copies).
        ``wait_s``: for another process to let go of the file (reach.py chooses it)."""
        logdir = Path(logdir).resolve()
        if not logdir.is_dir():
            raise CliffwatchError(f"log directory {logdir} does not exist; create it or pass "
                                  "--logdir with the folder your trainer writes to")
        db_path = Path(db_path or default_db(logdir)).resolve()
        db_path.parent.mkdir(parents=True, exist_ok=True)
        scratch = _scratch_dir(db_path)
        links = _links_dir(db_path) if link_logs else None
        spill = _spill_dir(db_path)
        private = [scratch, spill] + ([links] if links else [])
        db = None
        try:
            # DuckDB itself may touch only the scratch space: ingest hands it copies made from
            # checked descriptors (or links to them), so no statement can reach the logs or
            # the database folder by name
            db = Database(db_path, allowed_dirs=private, memory_limit=settings.memory_limit,
                          temp_dir=spill / "duckdb", temp_max=spill_cap(settings, spill),
                          wait_s=wait_s)
            served.claim(db, logdir, own_file=db_path == default_db(logdir).resolve())
            tailer = _tailer(db, logdir, settings, scratch, links)
            return cls(logdir, db, tailer, scratch, links, spill)
        except BaseException:  # e.g. a mistake in keys.toml: let go of the file for the next try
            if db is not None:
                db.close()
            for folder in private:
                shutil.rmtree(folder, ignore_errors=True)
            raise

    def close(self) -> None:
        self.db.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.spill is not None:
            shutil.rmtree(self.spill, ignore_errors=True)
        if self.links is not None:
            shutil.rmtree(self.links, ignore_errors=True)  # names only: the logs stay

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _tailer(db: Database, logdir: Path, settings, scratch: Path, links: Path | None) -> Tailer:
    # a damaged file can open and fail only here, where the tracked files are first read
    try:
        return Tailer(db, logdir, settings, scratch, links=links)
    except duckdb.Error as exc:
        raise CliffwatchError(unreadable(db.path, exc)) from None
