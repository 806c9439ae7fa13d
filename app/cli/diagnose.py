"""`diagnose PATH [--db FILE] [--json]`: the incidents of a run folder or of every run in a log
directory. Asks the running server when one watches PATH (its live incidents); otherwise
ingests PATH and diagnoses the whole runs itself.

Nothing above PATH is read: a run folder given alone is ingested alone, as the log directory
whose own files make the run ``.``, reported under the folder's name.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import orjson

from ..diagnose.coverage import Look, Unread, look
from ..diagnose.detect import Watch
from ..diagnose.diagnosis import diagnose
from ..diagnose.report import UNREAD_EXIT, as_dict, look_json, look_text
from ..errors import CliffwatchError
from ..ingest.formats import detect
from ..ingest.scan import kind_of
from ..monitor import Monitor, default_db
from ..reach import Server, find_server_above, open_target


def diagnose_command(path: Path, db: Path | None, as_json: bool, settings) -> int:
    """Print the diagnosis; 0, or UNREAD_EXIT (3) when a log of a run reported on was not
    read (a file that is no log, one that cannot be opened), or nothing was read at all: such
    a run is never clean."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise CliffwatchError(_no_folder(path))
    found, scope = _look(path, db, settings)
    if found.blank and not found.unread:
        found.unread = _no_log_files(path)  # nothing in the database: say what is there
    if as_json:
        sys.stdout.write(orjson.dumps(look_json(found), option=orjson.OPT_INDENT_2).decode()
                         + "\n")
    else:
        sys.stdout.write(look_text(found, scope))
    return UNREAD_EXIT if found.missed or found.blank else 0


# the run a log directory's own files belong to (scan.classify)
ROOT_RUN = "."


def _is_run(path: Path) -> bool:
    """A folder holding a log file of its own (ours or another trainer's)."""
    return any(entry.is_file() and kind_of(entry.name) for entry in path.iterdir())


def _look(path: Path, db: Path | None, settings) -> tuple[Look, str]:
    """The incidents, from the server watching ``path`` (or a folder above it) when one does
    and no --db is given, else from ingesting ``path`` here; and what they are about."""
    run = ROOT_RUN if _is_run(path) else None
    find = (lambda: None) if db else (lambda: find_server_above(path, settings))
    with _database(path, db) as db_path:
        target = open_target(path, db_path, settings, command="diagnose", find=find,
                             open_file=lambda file, wait_s: Monitor.open(
                                 path, settings, file, wait_s=wait_s))
        if isinstance(target, Server):
            served = path.relative_to(target.logdir).as_posix()
            served = None if served == ROOT_RUN else served
            return (_over_http(target, served),
                    f"run {served}" if served else f"{target.logdir}")
        with target as monitor:
            found = _local(monitor, run, settings)
    if run:
        return found.named(ROOT_RUN, path.name), f"run {path.name}"
    return found, f"{path}"


@contextlib.contextmanager
def _database(logdir: Path, db: Path | None):
    """``db``, else the folder's own database where it has one, else a scratch file: a one-off
    look at logs nobody monitors (an archive, a colleague's run) leaves no database behind in
    their folder."""
    if db is not None or default_db(logdir).exists():
        yield db
        return
    with tempfile.TemporaryDirectory(prefix="cliffwatch-diagnose-") as scratch:
        yield Path(scratch) / "cliffwatch.duckdb"


def _over_http(server: Server, run: str | None) -> Look:
    answer = server.call("GET", "/api/incidents", params={"run": run} if run else {},
                         timeout=60)
    unread = answer.get("unread")  # None: a server from before it said them
    return Look(answer["incidents"], None if unread is None else [Unread(**u) for u in unread])


def _local(monitor: Monitor, run: str | None, settings) -> Look:
    monitor.tailer.catch_up()
    watch = Watch.of(settings)
    cursor = monitor.db.cursor()
    runs = [run] if run else None
    found = [as_dict(i) for i in diagnose(cursor, watch, runs)]
    return look(cursor, watch, found, runs)


SHOWN = 10  # files or runs named in a message; the rest are counted


def _no_log_files(folder: Path) -> list[Unread]:
    """The files of a folder in which nothing was read, each with why (detect.detect's
    verdict on its name): a README, a config, a notebook is no log."""
    files = sorted(p for p in _walk(folder) if p.is_file())
    return [Unread(_run_of(folder, p), p.relative_to(folder).as_posix(), detect.NOT_A_NAME,
                   True) for p in files[:SHOWN]]


def _run_of(folder: Path, file: Path) -> str:
    run = file.parent.relative_to(folder).as_posix()
    return folder.name if run == ROOT_RUN else run


def _walk(folder: Path, limit: int = 10_000):
    """Up to ``limit`` entries under ``folder``, hidden ones (.cliffwatch/) left out."""
    for count, (top, dirs, names) in enumerate(os.walk(folder)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield from (Path(top) / n for n in names if not n.startswith("."))
        if count >= limit:
            return


def _no_folder(path: Path) -> str:
    """Why ``path`` cannot be diagnosed, and the runs that can: the run folders (a folder
    holding a log file) under the nearest folder above it that exists."""
    base = next((p for p in path.parents if p.is_dir()), None)
    runs = sorted({p.parent.relative_to(base).as_posix() for p in _walk(base)
                   if kind_of(p.name)}) if base else []
    known = (f"runs in {base}: {', '.join(runs[:SHOWN])}"
             + (f" and {len(runs) - SHOWN} more" if len(runs) > SHOWN else "")
             if runs else f"{base} holds no run folder (a folder with a log file)")
    return (f"{path} is not a folder; pass a run folder or a log directory ({known})")
