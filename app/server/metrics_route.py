"""``GET /metrics``: the Prometheus text format, for a team's Prometheus to scrape
(docs/prometheus.md; what is exported: app/read/prometheus.py)::

    # HELP cliffwatch_run_metric Newest value of a training metric of a run being exported ...
    # TYPE cliffwatch_run_metric gauge
    cliffwatch_run_metric{metric="loss",run="sweep3/lr1e-4"} 0.8123

Like every path it passes the guard first (guard.py): its own Host only, and off loopback the
token, which Prometheus sends with ``authorization: {credentials: TOKEN}`` in its scrape
config. An error is a CliffwatchError as JSON, as on /api (Prometheus marks the target down).
"""

from __future__ import annotations

import weakref

import duckdb
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import CollectorRegistry
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import CliffwatchError
from ..read.prometheus import Anchors, Collector, IngestFacts
from ..state import current
from .endpoint import guarded, threaded

# per database: what earlier scrapes found, so the next reads only lines written since
ANCHORS: weakref.WeakKeyDictionary[object, Anchors] = weakref.WeakKeyDictionary()


def scrape() -> bytes:
    """One scrape's text: a private registry (never the process-wide one, which would add
    this process's own Python metrics) holding a collector over a fresh snapshot."""
    state = current()
    ingest = IngestFacts(lag_s=round(state.worker.lag_s(), 3),
                         failing=state.worker.failure is not None)
    registry = CollectorRegistry()
    anchors = ANCHORS.setdefault(state.monitor.db, Anchors())
    registry.register(Collector(state.monitor.db.cursor(), state.settings, ingest, anchors))
    try:
        return generate_latest(registry)
    except duckdb.Error as exc:  # Prometheus marks the target down and shows this
        raise CliffwatchError(f"the database could not be read ({type(exc).__name__}); GET "
                              "/api/health says whether ingest is failing too", status=503) \
            from None


@guarded
async def metrics(request: Request) -> Response:
    # the classic text format (0.0.4): what every Prometheus 2.x reads, whatever it asks for
    return Response(await threaded(scrape), media_type=CONTENT_TYPE_PLAIN_0_0_4)


ROUTE = Route("/metrics", metrics, methods=["GET"])
