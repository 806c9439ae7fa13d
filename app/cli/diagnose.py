"""`diagnose PATH [--db FILE] [--json]`: the incidents of a run folder or of every run in a log
directory. Asks the running server when one watches PATH (its live incidents); otherwise
ingests PATH and diagnoses the whole runs itself.

Nothing above PATH is read: a run folder given alone is ingested alone, as the log directory
whose own files make the run ``.``, reported under the folder's name.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import httpx
import orjson

from ..diagnose.detect import Watch
from ..diagnose.diagnosis import diagnose
from ..diagnose.report import as_dict, text
from ..errors import CliffwatchError
from ..ingest.scan import kind_of
from ..monitor import Monitor, default_db
from .client import answer_json, auth_headers, server_url


def diagnose_command(path: Path, db: Path | None, as_json: bool, settings) -> int:
    path = Path(path).resolve()
    if not path.is_dir():
        raise CliffwatchError(f"{path} is not a folder; pass a run folder or a log directory")
    served = None if db else _served(path, settings)
    if served:
        url, logdir = served
        run = path.relative_to(logdir).as_posix() if path != logdir else None
        incidents = _over_http(url, run, settings)
        scope = f"run {run}" if run else f"{logdir}"
    elif _is_run(path):
        incidents = [{**i, "run": path.name} for i in _local(path, ROOT_RUN, db, settings)]
        scope = f"run {path.name}"
    else:
        incidents, scope = _local(path, None, db, settings), f"{path}"
    if as_json:
        sys.stdout.write(orjson.dumps(incidents, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(text(incidents, scope))
    return 0


# the run a log directory's own files belong to (scan.classify)
ROOT_RUN = "."


def _is_run(path: Path) -> bool:
    """A folder holding a log file of its own (ours or another trainer's)."""
    return any(entry.is_file() and kind_of(entry.name) for entry in path.iterdir())


def _served(path: Path, settings) -> tuple[str, Path] | None:
    """A running server whose log directory holds ``path``. Only its server.json is read in
    each folder above, and only one this user wrote (cli.client.server_url)."""
    for folder in (path, *path.parents):
        url = server_url(default_db(folder), settings)
        if url:
            return url, folder
    return None


def _over_http(url: str, run: str | None, settings) -> list[dict]:
    params = {"run": run} if run else {}
    try:
        response = httpx.get(f"{url}/api/incidents", params=params,
                             headers=auth_headers(settings), timeout=60)
    except httpx.HTTPError as exc:
        raise CliffwatchError(f"the server at {url} did not answer ({exc})") from None
    return answer_json(url, response)["incidents"]


def _local(logdir: Path, run: str | None, db: Path | None, settings) -> list[dict]:
    scratch = None
    if db is None and not default_db(logdir).exists():
        # a one-off look at logs nobody monitors (an archive, a colleague's run): leave no
        # database behind in their folder
        scratch = tempfile.TemporaryDirectory(prefix="cliffwatch-diagnose-")
        db = Path(scratch.name) / "cliffwatch.duckdb"
    try:
        with Monitor.open(logdir, settings, db) as monitor:
            monitor.tailer.catch_up()
            watch = Watch(settings.loss_metrics, settings.accuracy_metrics)
            found = diagnose(monitor.db.cursor(), watch, [run] if run else None)
            return [as_dict(i) for i in found]
    finally:
        if scratch:
            scratch.cleanup()
