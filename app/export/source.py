"""Where an export reads from: the running server over HTTP (it holds the database: DuckDB
lets one process open the file), or the database file itself, read-only, when none runs.
Both answer the same two reads (tables.py), so the archive is the same either way::

    with open_source(logdir, db_path, settings) as source:
        source.marks()                                     # {"database": ..., "tables": ...}
        with source.rows(TABLES_BY_NAME["metrics"], "demo", -1, 999) as reader:
            for batch in reader: ...                       # pyarrow RecordBatches
        with source.batch(TABLES_BY_NAME["metrics"], pending) as reader:
            ...                                            # many runs' rows, with `run`

Over HTTP the rows come as an Arrow IPC stream (GET /api/export/{table} for one run, POST
for a batch of runs) and the CLI writes the Parquet files: the server never writes to a path
a request names.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import httpx
import pyarrow as pa

from ..db.database import Database
from ..errors import CliffwatchError
from ..reach import Server, answer, answer_json, open_target
from . import tables


class LocalSource:
    def __init__(self, db: Database):
        self.db = db
        self.where = f"database {db.path}"

    def marks(self) -> dict:
        return tables.marks(self.db.cursor())

    @contextlib.contextmanager
    def rows(self, table: tables.Table, run: str, after, upto):
        yield tables.rows(self.db.cursor(), table, run, after, upto)

    @contextlib.contextmanager
    def batch(self, table: tables.Table, pending: list):
        runs, after, upto = _lists(pending)
        yield tables.batch(self.db.cursor(), table, runs, after, upto)

    def close(self) -> None:
        self.db.close()


class HttpSource:
    def __init__(self, server: Server):
        self.url = server.url
        self.where = f"the server at {server.url}"
        # one client for every request: a client of its own per run cost 27 ms of CPU each
        # (its TLS context), 3/4 of a first export of 1,000 small runs
        self.client = server.client()

    def marks(self) -> dict:
        return answer(self.url, lambda: self.client.get(f"{self.url}/api/export"))

    @contextlib.contextmanager
    def rows(self, table: tables.Table, run: str, after, upto):
        params = {"run": run} if table.replaced else {"run": run, "after": after, "upto": upto}
        with self._stream(table, f"run {run!r}", "GET", params=params) as reader:
            yield reader

    @contextlib.contextmanager
    def batch(self, table: tables.Table, pending: list):
        runs, after, upto = _lists(pending)
        body = {"runs": runs} if table.replaced else {"runs": runs, "after": after, "upto": upto}
        with self._stream(table, f"{len(runs)} runs", "POST", json=body) as reader:
            yield reader

    @contextlib.contextmanager
    def _stream(self, table: tables.Table, what: str, method: str, **request):
        try:
            # identity: gzip, which the server offers, costs more CPU than loopback saves
            with self.client.stream(method, f"{self.url}/api/export/{table.name}",
                                    headers={"Accept-Encoding": "identity"}, **request
                                    ) as response:
                if response.status_code != 200:
                    response.read()
                    answer_json(self.url, response)  # raises with the server's message
                stream = io.BufferedReader(_ByteStream(response.iter_bytes()), 1 << 20)
                yield pa.ipc.open_stream(stream)
        except httpx.HTTPError as exc:
            raise CliffwatchError(f"the server at {self.url} stopped sending {table.name} of "
                                  f"{what} ({exc}); run the export again: it resumes where "
                                  "the archive ends") from None

    def close(self) -> None:
        self.client.close()


def _lists(pending: list) -> tuple[list[str], list[int], list[int]]:
    """A batch's runs, with per run the row id archived and the mark to read up to."""
    return ([p.run for p in pending], [p.after for p in pending],
            [p.mark for p in pending])


class _ByteStream(io.RawIOBase):
    """A file object over an iterator of byte strings (an HTTP body as it arrives)."""

    def __init__(self, chunks):
        self.chunks, self.left = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.left:
            self.left = next(self.chunks, None)
            if self.left is None:
                self.left = b""
                return 0
        n = min(len(buffer), len(self.left))
        buffer[:n], self.left = self.left[:n], self.left[n:]
        return n


@contextlib.contextmanager
def open_source(logdir: Path, db: Path | None, settings):
    """The server holding the database, else the file opened read-only (waiting a few seconds
    while a starting server holds it: reach.WAIT_S)."""
    target = open_target(logdir, db, settings, command="export")
    source = HttpSource(target) if isinstance(target, Server) else LocalSource(target)
    try:
        yield source
    finally:
        source.close()
