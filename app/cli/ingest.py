"""`ingest`: catch a log directory up into its database and exit (``--once``), or keep
following it without serving (queries then need the server: use ``serve`` for both).

``--once`` lists what it recorded, and exits 1 if some file could not be stored (it is read
again, from the same offset, by the next run)::

    ingested 1200 rows from 3 files; 1 new ingest errors (SELECT * FROM ingest_errors)
      error   demo/metrics.jsonl @ 8812: invalid JSON (...)
"""

from __future__ import annotations

from pathlib import Path

from ..monitor import Monitor
from ..reach import open_writer

LISTED = 20  # errors printed by --once; the rest are counted


def ingest_once(logdir: Path, db: Path | None, settings) -> int:
    with open_writer(logdir, db, settings, command="ingest", link_logs=True) as monitor:
        before = _errors(monitor)
        rows = monitor.tailer.catch_up()
        errors = _errors(monitor) - before
        files = len(monitor.tailer.files)
        print(f"ingested {rows} rows from {files} files; {errors} new ingest errors"
              + (" (SELECT * FROM ingest_errors)" if errors else ""))
        for file, offset, severity, reason in monitor.db.run(
                "ingest/errors_after", {"after": before, "max_rows": LISTED}).fetchall():
            where = file if offset is None else f"{file} @ {offset}"  # a folder has none
            print(f"  {severity:<7} {where}: {reason}")
        if errors > LISTED:
            print(f"  ... and {errors - LISTED} more")
        if monitor.tailer.pending_partial:
            print(f"{monitor.tailer.pending_partial} file(s) end in an unfinished line; it is "
                  "read once its newline is written")
        failure = monitor.tailer.retry.summary(then=False)  # a one-shot run retries no more
        if failure:
            print(f"{failure}; not stored this time: run the same "
                  "command again (nothing is skipped; it resumes where it stopped)")
            return 1
    return 0


def _errors(monitor: Monitor) -> int:
    result = monitor.db.run("health")
    names = [d[0] for d in result.description]
    return dict(zip(names, result.fetchall()[0], strict=True))["errors"]


def ingest_follow(logdir: Path, db: Path | None, settings, poll: bool) -> int:
    # only following needs watchdog's observers: --once does not pay for importing them
    from ..ingest.worker import IngestWorker

    with open_writer(logdir, db, settings, command="ingest") as monitor:
        worker = IngestWorker(monitor.tailer, settings, poll=poll)
        worker.start()
        print(f"following {monitor.logdir}; Ctrl-C to stop", flush=True)
        try:
            worker.thread.join()
        finally:
            worker.stop()
    return 0
