"""The server process's shared objects, reachable from API handlers and from the dashboard
script (which Streamlit runs in the same process, in its own threads)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .alerts.delivery import DeliveryWorker
from .alerts.judge_worker import AlertWorker
from .background import Background
from .errors import CliffwatchError
from .ingest.worker import IngestWorker
from .monitor import Monitor
from .slots import Slots

# DuckDB cannot interrupt every expression (a huge list_sort runs to the end), so at most
# this many ad-hoc queries run at once; the rest of the API and the dashboard keep going.
ADHOC_SLOTS = 2


@dataclass
class ServerState:
    monitor: Monitor
    worker: IngestWorker
    settings: object
    alerts: AlertWorker | None = None
    delivery: DeliveryWorker | None = None
    diagnosis: Background | None = None  # live diagnosis (app/diagnose/worker.py)
    tiles: Background | None = None  # chart tiles (app/tiler.py)
    # taken by /api/sql on the event loop and by the SQL page from its script thread
    adhoc_slots: Slots = field(default_factory=lambda: Slots(ADHOC_SLOTS))


_current: ServerState | None = None


def set_current(state: ServerState | None) -> None:
    global _current
    _current = state


def current() -> ServerState:
    if _current is None:
        raise CliffwatchError("the monitor is still starting; reload in a moment", status=503)
    return _current
