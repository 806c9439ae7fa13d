"""`ingest`: catch a log directory up into its database and exit (``--once``), or keep
following it without serving (queries then need the server: use ``serve`` for both)."""

from __future__ import annotations

from pathlib import Path

from app.ingest.worker import IngestWorker
from app.monitor import Monitor


def ingest_once(logdir: Path, db: Path | None, settings) -> int:
    with Monitor.open(logdir, settings, db) as monitor:
        before = _errors(monitor)
        rows = monitor.tailer.tick(discover=True)
        errors = _errors(monitor) - before
        files = len(monitor.tailer.files)
        print(f"ingested {rows} rows from {files} files; {errors} new ingest errors"
              + (" (SELECT * FROM ingest_errors)" if errors else ""))
        if monitor.tailer.pending_partial:
            print(f"{monitor.tailer.pending_partial} file(s) end in an unfinished line; it is "
                  "read once its newline is written")
    return 0


def _errors(monitor: Monitor) -> int:
    result = monitor.db.run("health")
    names = [d[0] for d in result.description]
    return dict(zip(names, result.fetchall()[0], strict=True))["errors"]


def ingest_follow(logdir: Path, db: Path | None, settings, poll: bool) -> int:
    with Monitor.open(logdir, settings, db) as monitor:
        worker = IngestWorker(monitor.tailer, settings, poll=poll)
        worker.start()
        print(f"following {monitor.logdir}; Ctrl-C to stop", flush=True)
        try:
            worker.thread.join()
        finally:
            worker.stop()
    return 0
