"""`diagnose PATH [--db FILE] [--json]`: the incidents of a run folder or of every run in a log
directory. Asks the running server when one watches PATH (its live incidents); otherwise
ingests PATH's log directory and diagnoses the whole runs itself.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import httpx
import orjson

from app.cli.sql import server_url
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import diagnose
from app.diagnose.report import as_dict, text
from app.errors import CliffwatchError
from app.ingest.scan import KINDS
from app.monitor import Monitor, default_db


def diagnose_command(path: Path, db: Path | None, as_json: bool, settings) -> int:
    path = Path(path).resolve()
    if not path.is_dir():
        raise CliffwatchError(f"{path} is not a folder; pass a run folder or a log directory")
    logdir, run = _locate(path)
    served = None if db else _served(path)
    if served:
        url, logdir = served
        run = path.relative_to(logdir).as_posix() if path != logdir else None
        incidents = _over_http(url, run)
    else:
        incidents = _local(logdir, run, db, settings)
    if as_json:
        sys.stdout.write(orjson.dumps(incidents, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(text(incidents, f"run {run}" if run else f"{logdir}"))
    return 0


def _locate(path: Path) -> tuple[Path, str | None]:
    """(log directory, run id or None for all runs)."""
    if any((path / name).exists() for name in KINDS):
        return path.parent, path.name
    return path, None


def _served(path: Path) -> tuple[str, Path] | None:
    """A running server whose log directory holds ``path``."""
    for folder in (path, *path.parents):
        url = server_url(default_db(folder))
        if url:
            return url, folder
    return None


def _over_http(url: str, run: str | None) -> list[dict]:
    params = {"run": run} if run else {}
    response = httpx.get(f"{url}/api/incidents", params=params, timeout=60)
    payload = response.json()
    if response.status_code != 200:
        raise CliffwatchError(payload.get("error", response.text))
    return payload["incidents"]


def _local(logdir: Path, run: str | None, db: Path | None, settings) -> list[dict]:
    scratch = None
    if db is None and not default_db(logdir).exists():
        # a one-off look at logs nobody monitors (an archive, a colleague's run): leave no
        # database behind in their folder
        scratch = tempfile.TemporaryDirectory(prefix="cliffwatch-diagnose-")
        db = Path(scratch.name) / "cliffwatch.duckdb"
    try:
        with Monitor.open(logdir, settings, db) as monitor:
            monitor.tailer.tick(discover=True)
            watch = Watch(settings.loss_metrics, settings.accuracy_metrics)
            found = diagnose(monitor.db.cursor(), watch, [run] if run else None)
            return [as_dict(i) for i in found]
    finally:
        if scratch:
            scratch.cleanup()
