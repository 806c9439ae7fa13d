"""The server's shared objects, reachable from API handlers and from the dashboard script
(which Streamlit runs in the same process, in its own threads)."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import CliffwatchError
from app.ingest.worker import IngestWorker
from app.monitor import Monitor


@dataclass
class ServerState:
    monitor: Monitor
    worker: IngestWorker
    settings: object


_current: ServerState | None = None


def set_current(state: ServerState | None) -> None:
    global _current
    _current = state


def current() -> ServerState:
    if _current is None:
        raise CliffwatchError("the monitor is still starting; reload in a moment", status=503)
    return _current
