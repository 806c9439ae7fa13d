"""What `python -m app export` reads while a server holds the database (docs/export.md). The
server only reads: the CLI writes the Parquet files, so no request names a path to write::

    GET /api/export -> {"database": "2026-11-30 04:52:15.1", "tables": {"metrics": [
                        {"run": "sweep/lr 1e-4", "mark": 999999, "rows": 1000000}], ...}}
    GET /api/export/metrics?run=sweep/lr%201e-4&after=-1&upto=999999
        -> an Arrow IPC stream (application/vnd.apache.arrow.stream) of those lines
    POST /api/export/metrics  {"runs": ["a", "b"], "after": [-1, 41], "upto": [40, 90]}
        -> the lines of many runs in one stream, with their `run`, grouped by run in that
           order (a first export of thousands of small runs: one request per batch)

At most EXPORT_STREAMS streams at once (more wait EXPORT_WAIT_S, then get 503 saying to run
the export again). A stream reads its next batch only once the client took the last one
(60 unread streams once held 8.27 GB), ends when the client goes away, and is closed when the
client reads nothing for STALL_S.
"""

from __future__ import annotations

import io
import logging

import anyio
import duckdb
import orjson
import pyarrow as pa
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import CliffwatchError
from ..export import tables
from ..slots import Slots
from ..state import current
from .endpoint import body, guarded, reply, threaded

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# Each stream holds about one Arrow batch (32 MB of cells) in memory, and its page query up
# to 1.25 batches of DuckDB's memory limit while it runs (256 MB by default)
EXPORT_STREAMS = 2
EXPORT_WAIT_S = 5.0  # a stream waits this long for another to finish before 503
STALL_S = 60.0  # a client that takes no piece for this long is hung up on
PIECE = 1 << 20  # bytes handed to the connection at once: the stall clock restarts for each
STREAMS = Slots(EXPORT_STREAMS)
log = logging.getLogger("cliffwatch.server")


@guarded
async def export_marks(request: Request) -> Response:
    return reply(await threaded(lambda: tables.marks(current().monitor.db.cursor())))


@guarded
async def export_rows(request: Request) -> Response:
    table = tables.table(request.path_params["table"])
    run, after, upto = _params(request, table)
    return await _streamed(lambda cursor: tables.rows(cursor, table, run, after, upto))


@guarded
async def export_batch(request: Request) -> Response:
    table = tables.table(request.path_params["table"])
    runs, after, upto = _lists(await body(request), table)
    return await _streamed(lambda cursor: tables.batch(cursor, table, runs, after, upto))


async def _streamed(read) -> Response:
    """``read(cursor)``'s Arrow reader as a stream, on a cursor of its own, in one of the
    EXPORT_STREAMS slots (both released when the stream ends, however it ends)."""
    waiting = anyio.move_on_after(EXPORT_WAIT_S)
    with waiting:
        await STREAMS.acquire()
    if not waiting.cancelled_caught:
        return await _opened(read)
    raise CliffwatchError(f"{EXPORT_STREAMS} exports are already streaming from this server; "
                          "run the export again when one has finished (it resumes where the "
                          "archive ends)", status=503)


async def _opened(read) -> Response:
    def start():
        cursor = current().monitor.db.con.cursor()
        try:
            return cursor, read(cursor)
        except BaseException:
            cursor.close()
            raise

    try:
        cursor, reader = await threaded(start)
    except BaseException as exc:
        STREAMS.release()
        if isinstance(exc, duckdb.Error):
            raise CliffwatchError(f"the database could not read this export ({type(exc).__name__}:"
                                  f" {exc}); run the export again, or raise --memory-limit if "
                                  "it says out of memory", status=503) from None
        raise
    return ArrowStream(cursor, reader)


class ArrowStream:
    """An ASGI response: the reader's batches as an Arrow IPC stream, each batch read and
    encoded only once the client took the last one (uvicorn's send waits while the connection
    is full). Then the cursor is closed and the slot given back, whether the stream ended, the
    client went away or it stalled."""

    def __init__(self, cursor, reader: pa.RecordBatchReader):
        self.cursor = cursor
        self.chunks = _ipc(reader)

    async def __call__(self, scope, receive, send) -> None:
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_cancel_on_disconnect, receive, group.cancel_scope)
                await self._send(send)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await threaded(self._close)
            STREAMS.release()

    async def _send(self, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", ARROW_STREAM.encode())]})
        while True:
            try:
                chunk = await threaded(next, self.chunks, None)
            except Exception as exc:  # the client sees the stream cut short, and says so
                log.warning("an export stream stopped (%s: %s)", type(exc).__name__, exc)
                return
            if chunk is None:
                break
            for at in range(0, len(chunk), PIECE):
                with anyio.move_on_after(STALL_S) as waited:
                    await send({"type": "http.response.body", "body": chunk[at:at + PIECE],
                                "more_body": True})
                if waited.cancelled_caught:
                    log.warning("an export client took nothing for %.0f s: its stream is "
                                "closed", STALL_S)
                    return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _close(self) -> None:
        self.chunks.close()
        self.cursor.close()
        pa.default_memory_pool().release_unused()  # what the batches held, back to the system


async def _cancel_on_disconnect(receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _params(request: Request, table: tables.Table) -> tuple[str, int | None, int | None]:
    query = request.query_params
    if "run" not in query:
        raise CliffwatchError("give the run: /api/export/TABLE?run=NAME&after=N&upto=M")
    if table.replaced:
        return query["run"], None, None
    try:
        return query["run"], int(query["after"]), int(query["upto"])
    except (KeyError, ValueError):
        raise CliffwatchError(f"{table.name} is read by row id: give after=N&upto=M as "
                              "integers (the marks of GET /api/export)") from None


def _lists(payload: bytes, table: tables.Table) -> tuple[list, list | None, list | None]:
    """The runs of a batch and, for an appended table, per run its after and upto row ids."""
    keys = ("runs",) if table.replaced else ("runs", "after", "upto")
    try:
        sent = orjson.loads(payload)
        lists = [sent[k] for k in keys]
        kinds = (str,) if table.replaced else (str, int, int)
        if not _typed(lists, kinds):
            raise TypeError
    except (orjson.JSONDecodeError, KeyError, TypeError):
        wanted = '{"runs": [...]}' if table.replaced else \
            '{"runs": [...], "after": [...], "upto": [...]} (as many integers as runs)'
        raise CliffwatchError(f"send {wanted} as JSON: the runs to read {table.name} of, "
                              "and their marks from GET /api/export") from None
    return (lists[0], None, None) if table.replaced else tuple(lists)


def _typed(lists: list, kinds: tuple) -> bool:
    """Lists of one length (not empty), each of values of its kind."""
    return bool(lists[0]) and all(
        isinstance(values, list) and len(values) == len(lists[0])
        and all(type(v) is kind for v in values)
        for values, kind in zip(lists, kinds, strict=True))


def _ipc(reader: pa.RecordBatchReader):
    """The reader's batches as an Arrow IPC stream, one batch at a time."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            del batch  # encoded: only the bytes stay while the client reads them
            yield _take(sink)
    yield _take(sink)  # the schema of an empty stream, and the end-of-stream marker


def _take(sink: io.BytesIO) -> bytes:
    data = sink.getvalue()
    sink.seek(0)
    sink.truncate()
    return data


ROUTES = [
    Route("/api/export", export_marks, methods=["GET"]),
    Route("/api/export/{table}", export_rows, methods=["GET"]),
    Route("/api/export/{table}", export_batch, methods=["POST"]),
]
