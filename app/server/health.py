"""``GET /api/health``: what the monitor holds, and whether each of its parts works::

    {"state": "failing", "runs": 2, "rows": 9120, "files": 5, "errors": 0, "skipped_files": 0,
     "skipped": [], "ingest_lag_s": 0.1, "unfinished_lines": 0,
     "ingest": "failing", "ingest_error": "ingest paused: the database was invalidated ...",
     "database": "failing", "database_error": "the database was invalidated by DuckDB ...",
     "diagnosis": "ok", "diagnosis_error": null, "tiles": "ok", "tiles_error": null,
     "alerts": "ok", "alerts_error": null, "watching": "inotify", "watching_note": null, ...}

``state`` is "ok" only while every part is: ingest, the database, live diagnosis, chart
tiles, and alerts (rules and delivery together). Each ``*_error`` says since when it fails,
the last error and what to do. The counts are null while the database cannot answer.
"""

from __future__ import annotations

from ..errors import CliffwatchError
from ..read.named import named

COUNTS = ("runs", "rows", "files", "errors", "skipped_files")


def report(state, records) -> dict:
    """The health object; ``records`` turns a named query's result into dicts."""
    counts, skipped, unanswered = _counts(records)
    parts = {
        "ingest": state.worker.failure,
        "database": state.monitor.db.failure or unanswered,
        "diagnosis": _failure(state.diagnosis),
        "tiles": _failure(state.tiles),
        "alerts": "; ".join(f for f in (_failure(state.alerts), _failure(state.delivery))
                            if f) or None,
    }
    worst = "failing" if any(parts.values()) else "ok"
    shown = {k: v for name, error in parts.items()
             for k, v in ((name, "failing" if error else "ok"), (f"{name}_error", error))}
    return {"state": worst, **counts, "skipped": skipped,
            "ingest_lag_s": round(state.worker.lag_s(), 3),
            "unfinished_lines": state.worker.tailer.pending_partial, **shown,
            "watching": state.worker.watching.mode,
            "watching_note": state.worker.watching.problem,
            "logdir": str(state.monitor.logdir), "db": str(state.monitor.db.path)}


def _counts(records) -> tuple[dict, list, str | None]:
    try:
        row = records(named("health"))[0]
        skipped = records(named("skipped_files")) if row["skipped_files"] else []
    except CliffwatchError as exc:  # the database is being opened again, or damaged
        return dict.fromkeys(COUNTS), [], f"the database does not answer: {exc}"
    return row, skipped, None


def _failure(worker) -> str | None:
    return getattr(worker, "failure", None)
