"""Alerts over HTTP (the guard in front refuses foreign Origins and, off loopback, requests
without the token, for these as for every path). The work is app/alerts/actions.py's (what
changes) and app/read/alerts.py's (what reads), shared with the Alerts page::

    GET  /api/alerts                      -> rules, states, silences, recent notifications with
                                             their delivery attempts, targets (redacted)
    POST /api/alerts/silences             {"rule": "stall*", "run": "gpt-*", "for": "2h",
                                           "comment": "known"} -> {"id": 3, "until": 1767.0, ...}
    POST /api/alerts/silences/3/end       (or DELETE /api/alerts/silences/3) -> {"id": 3, ...}
    POST /api/alerts/test                 {"from": "cliffwatch"} (optional: who asked, as
                                          the message says) -> {"results": [{"label":
                                          "https://hooks.slack.com/services/T…/…", ...}]}
"""

from __future__ import annotations

import time
import uuid

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..alerts import actions
from ..errors import CliffwatchError
from ..read import alerts as reads
from ..state import current
from .endpoint import body, guarded, reply, threaded

POLL_S = 0.1
TEST_HELP = ('the body is empty or a JSON object such as {"from": "cliffwatch"}; "from" is one '
             f"of {', '.join(actions.SENT_FROM)}")


@guarded
async def alerts(request: Request) -> Response:
    return reply(await threaded(lambda: reads.overview(current())))


@guarded
async def add_silence(request: Request) -> Response:
    fields = actions.silence_fields(_object(await body(request), actions.SILENCE_HELP))
    return reply(await threaded(actions.add_silence, current(), *fields))


@guarded
async def end_silence(request: Request) -> Response:
    ident = request.path_params["id"]
    return reply(await threaded(actions.unsilence, current(), ident))


@guarded
async def send_test(request: Request) -> Response:
    asked = _object(await body(request), TEST_HELP)
    state = current()
    key = f"test-{uuid.uuid4().hex}"
    nid = await threaded(actions.send_test, state, key, asked.get("from", "api"))
    deadline = time.monotonic() + state.settings.webhook_timeout + 2
    while True:
        results = await threaded(reads.test_results, state, nid)
        if all(r["status"] != "pending" for r in results) or time.monotonic() > deadline:
            break
        await anyio.sleep(POLL_S)
    return reply({"notification": nid, "key": key, "results": results})


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
