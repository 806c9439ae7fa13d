"""What `python -m app export` reads while a server holds the database (docs/export.md). The
server only reads: the CLI writes the Parquet files, so no request names a path to write::

    GET /api/export -> {"database": "2026-11-30 04:52:15.1", "tables": {"metrics": [
                        {"run": "sweep/lr 1e-4", "mark": 999999, "rows": 1000000}], ...}}
    GET /api/export/metrics?run=sweep/lr%201e-4&after=-1&upto=999999
        -> an Arrow IPC stream (application/vnd.apache.arrow.stream) of those lines
    POST /api/export/metrics  {"runs": ["a", "b"], "after": [-1, 41], "upto": [40, 90]}
        -> the lines of many runs in one stream, with their `run`, grouped by run in that
           order (a first export of thousands of small runs: one request per batch)
"""

from __future__ import annotations

import io

import orjson
import pyarrow as pa
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..errors import CliffwatchError
from ..export import tables
from ..state import current
from .endpoint import body, guarded, reply, threaded

ARROW_STREAM = "application/vnd.apache.arrow.stream"


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
    """``read(cursor)``'s Arrow reader as a stream, on a cursor of its own: the stream is read
    a batch at a time, from pool threads (the cursor is closed if ``read`` fails)."""
    def start():
        cursor = current().monitor.db.con.cursor()
        try:
            return cursor, read(cursor)
        except BaseException:
            cursor.close()
            raise

    cursor, reader = await threaded(start)
    return StreamingResponse(_ipc(cursor, reader), media_type=ARROW_STREAM)


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


def _ipc(cursor, reader: pa.RecordBatchReader):
    """The reader's batches as an Arrow IPC stream, one batch at a time."""
    sink = io.BytesIO()
    try:
        with pa.ipc.new_stream(sink, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
                yield _take(sink)
        yield _take(sink)  # the schema of an empty stream, and the end-of-stream marker
    finally:
        cursor.close()


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
