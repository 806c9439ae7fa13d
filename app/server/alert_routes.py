"""Alerts over HTTP (the guard in front refuses foreign Origins and, off loopback, requests
without the token, for these as for every path)::

    GET  /api/alerts                      -> rules, states, silences, recent notifications with
                                             their delivery attempts, targets (redacted)
    POST /api/alerts/silences             {"rule": "stall*", "run": "gpt-*", "for": "2h",
                                           "comment": "known"} -> {"id": 3, "until": 1767.0, ...}
    POST /api/alerts/silences/3/end       (or DELETE /api/alerts/silences/3) -> {"id": 3, ...}
    POST /api/alerts/test                 -> {"results": [{"label": "https://hooks.slack.com/
                                              services/T…/…", "status": "sent", ...}]}
"""

from __future__ import annotations

import time
import uuid
from fnmatch import fnmatchcase
from pathlib import Path

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.alerts import overview
from app.alerts.duration import parse_duration
from app.alerts.fields import glob_problem
from app.alerts.rules import load_rules
from app.alerts.targets import targets
from app.db import queries
from app.errors import CliffwatchError
from app.server.endpoint import body, guarded, reply, threaded
from app.state import current

SILENCE_KEYS = ("rule", "run", "for", "comment")
SILENCE_HELP = ('send {"rule": "GLOB", "run": "GLOB", "for": "2h", "comment": "why"} as JSON '
                "(run and comment optional)")
COMMENT_MAX = 500
POLL_S = 0.1


def active_rules(state) -> tuple[list, str]:
    """The rules the alert worker runs, or (before it is wired in) those it would load."""
    worker = getattr(state, "alerts", None)
    if worker is not None and getattr(worker, "rules", None) is not None:
        rules = list(worker.rules)
        return rules, getattr(worker, "source", None) or f"{len(rules)} rules in force"
    path = Path(state.settings.rules) if state.settings.rules else None
    return load_rules(path, state.monitor.logdir)


def active_targets(state) -> list:
    delivery = getattr(state, "delivery", None)
    return list(delivery.targets) if delivery is not None else targets(state.settings)


@guarded
async def alerts(request: Request) -> Response:
    def work():
        state = current()
        rules, source = active_rules(state)
        return overview.overview(state.monitor.db.cursor(), rules, source, active_targets(state))

    return reply(await threaded(work))


@guarded
async def add_silence(request: Request) -> Response:
    rule, run, seconds, comment = silence_fields(_object(await body(request), SILENCE_HELP))

    def work():
        state = current()
        names = [r.name for r in active_rules(state)[0]]
        matches = [name for name in names if fnmatchcase(name, rule)]
        if not matches:
            raise CliffwatchError(f"no rule matches {rule!r}; the rules are: "
                                  f"{', '.join(names)} (`python -m app alerts list`)")
        now = time.time()
        row = _rows(state, "alerts/api_silence_insert", {
            "rule": rule, "run": run, "created_time": now, "until_time": now + seconds,
            "comment": comment})[0]
        return {**row, "until": row["until_time"], "matches": matches}

    return reply(await threaded(work))


def silence_fields(payload: dict) -> tuple[str, str, float, str | None]:
    unknown = sorted(set(payload) - set(SILENCE_KEYS))
    if unknown:
        raise CliffwatchError(f"unknown field(s) {', '.join(unknown)}; {SILENCE_HELP}")
    rule, run = payload.get("rule"), payload.get("run", "*")
    for name, glob in (("rule", rule), ("run", run)):
        if not isinstance(glob, str) or not glob:
            raise CliffwatchError(f"{name} must be a glob such as 'stall' or 'gpt-*'; "
                                  f"{SILENCE_HELP}")
        problem = glob_problem(glob)
        if problem:
            raise CliffwatchError(f"{name} {glob!r} is not a valid glob: {problem}")
    try:
        seconds = parse_duration(payload.get("for", ""))
    except ValueError as exc:
        raise CliffwatchError(f"for: {exc}") from None
    if seconds <= 0:
        raise CliffwatchError("for must be longer than 0, e.g. \"2h\"; to end a silence use "
                              "`alerts unsilence ID`")
    comment = payload.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX):
        raise CliffwatchError(f"comment must be text of at most {COMMENT_MAX} characters")
    return rule, run, seconds, comment


@guarded
async def end_silence(request: Request) -> Response:
    ident = request.path_params["id"]

    def work():
        state = current()
        ended = _rows(state, "alerts/api_silence_end", {"id": ident, "now": time.time()})
        if ended:
            return ended[0]
        found = _rows(state, "alerts/api_silence", {"id": ident})
        if not found:
            raise CliffwatchError(f"no silence {ident}; `python -m app alerts list` shows the "
                                  "silences in force", status=404)
        raise CliffwatchError(f"silence {ident} has already ended", status=409)

    return reply(await threaded(work))


@guarded
async def send_test(request: Request) -> Response:
    await body(request)  # nothing to read; drained so the size cap still applies
    state = current()
    delivery = getattr(state, "delivery", None)
    if delivery is None:
        raise CliffwatchError("this server does not deliver alerts yet (still starting?); "
                              "try again in a moment", status=503)
    key = f"test-{uuid.uuid4().hex}"
    nid = await threaded(queue_test, state, [t.id for t in delivery.targets], key)
    delivery.poke()
    deadline = time.monotonic() + state.settings.webhook_timeout + 2
    while True:
        results = await threaded(_rows, state, "alerts/api_test_results",
                                 {"notification_id": nid})
        if all(r["status"] != "pending" for r in results) or time.monotonic() > deadline:
            break
        await anyio.sleep(POLL_S)
    labels = {t.id: t.label for t in delivery.targets}
    return reply({"notification": nid, "key": key,
                  "results": [{**r, "label": labels.get(r["target"], r["target"])}
                              for r in results]})


def queue_test(state, target_ids: list[str], key: str) -> int:
    """A `test` notification and one outbox row per target, in one transaction."""
    now = time.time()
    facts = {"rule": "test", "type": "test", "severity": "info", "kind": "test", "run": None,
             "metric": None, "value": None, "typical": None, "step": None, "time": now,
             "causes": [], "evidence": [], "checkpoint": None,
             "summary": "sent by `python -m app alerts test`; this webhook works"}
    cur = state.monitor.db.cursor()
    cur.begin()
    try:
        nid = queries.execute(cur, "alerts/api_test_notification", {
            "key": key, "created_time": now, "facts": orjson.dumps(facts).decode()}).fetchone()[0]
        for target in target_ids:
            queries.execute(cur, "alerts/api_test_outbox",
                            {"notification_id": nid, "target": target, "now": now})
        cur.commit()
    except BaseException:
        state.monitor.db.rollback(cur)
        raise
    return nid


def _rows(state, name: str, params: dict) -> list[dict]:
    return overview.rows(state.monitor.db.cursor(), name, params)


def _object(raw: bytes, help_text: str) -> dict:
    try:
        payload = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        payload = None
    if not isinstance(payload, dict):
        raise CliffwatchError(help_text)
    return payload


ROUTES = [
    Route("/api/alerts", alerts, methods=["GET"]),
    Route("/api/alerts/silences", add_silence, methods=["POST"]),
    Route("/api/alerts/silences/{id:int}/end", end_silence, methods=["POST"]),
    Route("/api/alerts/silences/{id:int}", end_silence, methods=["DELETE"]),
    Route("/api/alerts/test", send_test, methods=["POST"]),
]
