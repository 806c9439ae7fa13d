"""What every /api endpoint shares: JSON replies, a CliffwatchError as ``{"error": ...}``
with its status (never a traceback), request bodies read with a cap, work in a thread."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..errors import CliffwatchError
from ..state import current


def reply(payload, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


def guarded(handler):
    """Render a CliffwatchError as {"error": message}; never a traceback."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except CliffwatchError as exc:
            return reply({"error": str(exc)}, exc.status)

    return endpoint


async def threaded(func, *args):
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(func, *args)


async def body(request: Request) -> bytes:
    """The request body, read as it arrives and refused once past ``max_request_bytes`` (a
    100 MB POST used to be buffered whole, and then copied)."""
    cap = current().settings.max_request_bytes
    declared = request.headers.get("content-length", "")
    chunks, size = [], 0
    if not declared.isdigit() or int(declared) <= cap:
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                break
            chunks.append(chunk)
    if size > cap or (declared.isdigit() and int(declared) > cap):
        raise CliffwatchError(f"request body over {cap} bytes; send a shorter query or raise "
                              "--max-request-bytes", status=413)
    return b"".join(chunks)
