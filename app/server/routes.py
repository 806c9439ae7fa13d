"""HTTP API under /api, served by the same process that owns the database.

    GET  /api/health  -> {"state": "ok", "runs": 2, "rows": 9120, "files": 5, "errors": 0,
                          "ingest_lag_s": 0.1, "ingest": "ok", "ingest_error": null,
                          "database": "ok", "diagnosis": "ok", "tiles": "ok", "alerts": "ok",
                          "skipped_files": 1, (each part with its *_error; health.py)
                          "watching": "inotify", "watching_note": null,
                          "skipped": [{"file": "hf/trainer_log.jsonl", "reason": "not read: ..."}]}
    GET  /api/runs?limit=50&offset=0&q=sweep3&status=live|finished|all
                      -> {"runs": [{"run": "demo", "status": "running", ...}], "total": 10000,
                          "limit": 50, "offset": 0, "next": 50}   (live first, then newest)
    GET  /api/query/time_gaps?run=demo -> a named query from queries/, as JSON
    GET  /api/incidents?run=demo -> {"incidents": [{"kind": "spike", "causes": [...], ...}],
                                     "unread": [{"run": "demo", "file": "demo/notes.txt",
                                                 "reason": "not a log yet: ...", "missed": true}]}
    POST /api/sql     {"sql": "SELECT step, loss FROM metrics"} -> {"columns": [...], "rows": [...]}
    /api/alerts...    rules, states, silences, notifications, test messages (alert_routes.py)
    /api/export/...   a run's new rows as Arrow, for `python -m app export` (export_routes.py)
    GET  /metrics     Prometheus text format (metrics_route.py)
"""

from __future__ import annotations

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..db import queries
from ..db.readonly import SqlResult, jsonable, run_readonly
from ..diagnose import coverage
from ..diagnose.rules import KEYS as INCIDENT_KEYS
from ..errors import CliffwatchError
from ..read.known_runs import unknown_run
from ..read.named import named
from ..state import ADHOC_SLOTS, current
from .alert_routes import ROUTES as ALERT_ROUTES
from .endpoint import body as _body
from .endpoint import guarded as _guarded
from .endpoint import reply as _json
from .endpoint import threaded as _threaded
from .export_routes import ROUTES as EXPORT_ROUTES
from .health import report as health_report
from .metrics_route import ROUTE as METRICS_ROUTE


def records(result: SqlResult) -> list[dict]:
    return [dict(zip(result.columns, (jsonable(v) for v in row), strict=True))
            for row in result.rows]


async def _limited(run):
    """``run()`` in a worker thread once an ad-hoc slot is free, or 503 if none frees in time.
    The wait holds no thread: 50 waiting /api/sql once took every pool thread, and
    /api/health waited 9.6 s behind them."""
    state = current()
    acquired = False
    with anyio.move_on_after(state.settings.sql_time_limit):
        await state.adhoc_slots.acquire()
        acquired = True
    if not acquired:
        raise CliffwatchError(f"{ADHOC_SLOTS} ad-hoc queries are already running; try again "
                              "when they finish", status=503)
    try:
        return await _threaded(run)
    finally:
        state.adhoc_slots.release()


@_guarded
async def health(request: Request) -> Response:
    """Every part's state (app/server/health.py); answers while the database does not."""
    return _json(await _threaded(lambda: health_report(current(), records)))


@_guarded
async def runs(request: Request) -> Response:
    """One page of runs, live first (app/read/runs.py ``api_page``); 400 on a bad parameter."""
    from ..read import runs as runs_mod

    ask = runs_mod.Ask.parse(request.query_params)
    return _json(await _threaded(lambda: runs_mod.api_page(
        current().monitor.db.cursor(), ask, idle_after=current().settings.idle_after)))


@_guarded
async def sql(request: Request) -> Response:
    body = await _body(request)
    try:
        payload = orjson.loads(body) if body[:1] == b"{" else {"sql": body.decode()}
        text, limit = payload["sql"], payload.get("max_rows")
        positive = limit is None or (type(limit) is int and limit > 0)
        if not isinstance(text, str) or not positive:
            raise TypeError
    except (orjson.JSONDecodeError, KeyError, UnicodeDecodeError, TypeError):
        raise CliffwatchError('send {"sql": "SELECT ...", "max_rows": 100} as JSON (max_rows '
                              "optional, a positive integer), or the query as plain text") \
            from None

    def work():
        settings = current().settings
        cap = min(limit or settings.sql_max_rows, settings.sql_max_rows)
        return run_readonly(current().monitor.db.cursor(), text, max_rows=cap,
                            time_limit=settings.sql_time_limit, max_bytes=settings.sql_max_bytes)

    return _json((await _limited(work)).to_json())


@_guarded
async def query(request: Request) -> Response:
    name = request.path_params["name"]
    texts = dict(request.query_params)
    result = await _limited(lambda: named(name, queries.load(name).convert(texts)))
    if not result.rows and texts.get("run"):
        await _threaded(_known_run, texts["run"])
    return _json({"query": name, **result.to_json()})


@_guarded
async def incidents(request: Request) -> Response:
    run = request.query_params.get("run")
    result = await _threaded(named, "incidents", {"run": run})
    unread = await _threaded(_unread, run)
    if not result.rows and not unread and run:  # a folder whose files are unread is no run
        await _threaded(_known_run, run)       # yet, and its answer says why
    return _json({"incidents": [incident_json(r) for r in records(result)],
                  "unread": unread})


def _unread(run: str | None) -> list[dict]:
    """The run's files not read, and why (every run's without ``run``): diagnose says them."""
    cursor = current().monitor.db.cursor()
    return coverage.unread_json(coverage.unread(cursor, [run] if run else None))


def _known_run(run: str) -> None:
    """An empty answer about a run that does not exist is a 404 naming the runs that do."""
    problem = unknown_run(records(named("run_known", {"run": run}))[0], run)
    if problem:
        raise CliffwatchError(problem, status=404)


def incident_json(row: dict) -> dict:
    """The diagnose --json shape: exactly these keys."""
    return {k: row[k] for k in INCIDENT_KEYS}

ROUTES = [
    Route("/api/health", health, methods=["GET"]),
    Route("/api/runs", runs, methods=["GET"]),
    Route("/api/sql", sql, methods=["POST"]),
    Route("/api/query/{name}", query, methods=["GET"]),
    Route("/api/incidents", incidents, methods=["GET"]),
    *ALERT_ROUTES,
    *EXPORT_ROUTES,
    METRICS_ROUTE,
]
