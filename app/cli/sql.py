"""`sql "QUERY"`: ask the running server over HTTP when one holds the database; otherwise open
the file read-only ourselves. DuckDB lets only one process hold a file, so this is the one way
to query while a server runs.

    $ python -m app sql "SELECT step, loss FROM metrics WHERE run = 'demo' LIMIT 2"
    step  loss
    ----  ------
    1     6.2101
    3     6.0132
"""

from __future__ import annotations

import csv
import ipaddress
import logging
import os
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import orjson

from app.db import queries
from app.db.database import Database
from app.db.readonly import jsonable, run_readonly
from app.errors import CliffwatchError
from app.monitor import default_db
from app.server.serve import server_file

LOCAL_WAIT_S = 10.0
log = logging.getLogger("cliffwatch.cli")


def sql_command(text: str | None, name: str | None, params: list[str], logdir: Path,
                db: Path | None, fmt: str, settings) -> int:
    if bool(text) == bool(name):
        raise CliffwatchError('give either SQL text or --query NAME (see `ls queries/`), e.g. '
                              'sql --query time_gaps --param run=demo')
    named = None
    if name:
        query = queries.load(name)
        named = (name, query.bind(query.convert(_pairs(params))))
    result = run_query(text, logdir, db, settings, named)
    sys.stdout.write(render(result, fmt))
    if result["truncated"]:
        reason = result.get("truncated_reason") or (
            f"stopped at {len(result['rows'])} rows; add LIMIT or raise --sql-max-rows")
        print(f"cliffwatch: output truncated: {reason}", file=sys.stderr)
    return 0


def _pairs(params: list[str]) -> dict[str, str]:
    pairs = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliffwatchError(f"--param takes NAME=VALUE, got {item!r}")
        pairs[key] = value
    return pairs


def run_query(query: str | None, logdir: Path, db: Path | None, settings,
              named: tuple[str, dict] | None = None) -> dict:
    """The result as the API's JSON shape: {"columns", "rows", "truncated", ...}. ``named``
    is (query name, bound parameters) instead of SQL text."""
    db_path = Path(db or default_db(logdir)).resolve()
    deadline = time.monotonic() + LOCAL_WAIT_S
    while True:
        url = server_url(db_path, settings)
        if url:
            headers = auth_headers(settings)
            return (_named_http(url, headers, *named) if named
                    else _over_http(url, headers, query))
        try:
            return _local(db_path, logdir, query, settings, named)
        except CliffwatchError as exc:
            # held by another process: a server that is starting writes server.json soon
            if "is held by" not in str(exc):
                raise
            if time.monotonic() > deadline:
                holder = str(exc).split(" is held by ", 1)[1].split(".")[0]
                raise CliffwatchError(
                    f"{db_path} is held by {holder}, which answers no queries (an `ingest` "
                    f"that keeps following?). Run `python -m app serve --logdir DIR` to ingest "
                    f"and query at once, or stop that process.") from None
            time.sleep(0.3)


def server_url(db_path: Path, settings) -> str | None:
    """The URL of a live server holding this database, if any.

    server.json decides where the query (and CLIFFWATCH_TOKEN) goes, so it counts only when
    this user wrote it and nobody else can rewrite it, and only when its URL is an address of
    this machine: a planted or edited file must not send the token elsewhere."""
    info = server_file(db_path)
    try:
        if not _ours(info):
            return None
        url = orjson.loads(info.read_bytes())["url"]
        if not is_local_url(url):
            log.warning("ignoring %s: its URL %r is not an address of this machine", info, url)
            return None
        httpx.get(f"{url}/api/health", headers=auth_headers(settings), timeout=2.0)
    except (OSError, ValueError, KeyError, TypeError, httpx.HTTPError):
        return None
    return url


def _ours(info: Path) -> bool:
    stat = info.stat()
    if stat.st_uid != os.getuid() or stat.st_mode & 0o022:
        log.warning("ignoring %s: it must belong to you and be writable by you alone", info)
        return False
    return True


def is_local_url(url: str) -> bool:
    """An http URL whose host is localhost or an IP address of this machine. Names other than
    localhost are not resolved: DNS could send them anywhere."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "http" or not host:
        return False
    if host == "localhost":
        return True
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return False
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))  # succeeds only for this machine's own addresses
        except OSError:
            return False
    return True


def auth_headers(settings) -> dict[str, str]:
    token = getattr(settings, "token", "")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _over_http(url: str, headers: dict, query: str) -> dict:
    return _answer(url, lambda: httpx.post(f"{url}/api/sql", json={"sql": query},
                                           headers=headers, timeout=None))


def _named_http(url: str, headers: dict, name: str, params: dict) -> dict:
    texts = {k: "null" if v is None else str(v) for k, v in params.items()}
    return _answer(url, lambda: httpx.get(f"{url}/api/query/{name}", params=texts,
                                          headers=headers, timeout=None))


def _answer(url: str, send) -> dict:
    try:
        response = send()
    except httpx.HTTPError as exc:
        raise CliffwatchError(f"the server at {url} did not answer ({exc})") from None
    return answer_json(url, response)


def answer_json(url: str, response: httpx.Response) -> dict:
    """The JSON body of a 200 answer; any other answer as a CliffwatchError."""
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    if response.status_code == 200 and isinstance(payload, dict):
        return payload
    message = payload.get("error") if isinstance(payload, dict) else None
    if response.status_code == 401:
        message = (f"the server at {url} needs its token: set CLIFFWATCH_TOKEN (or --token) "
                   "to the one it was started with or printed at start-up")
    raise CliffwatchError(message or f"the server at {url} answered {response.status_code}")


def _local(db_path: Path, logdir: Path | None, query: str | None, settings, named=None) -> dict:
    # as in the server, ad-hoc SQL may read the log directory and nothing else
    db = Database(db_path, read_only=True, allowed_dirs=[logdir] if logdir else [], wait_s=0.5,
                  memory_limit=settings.memory_limit)
    params = None
    if named:
        query, params = queries.load(named[0]).text(), named[1]
    try:
        return run_readonly(db.cursor(), query, params=params, max_rows=settings.sql_max_rows,
                            time_limit=settings.sql_time_limit,
                            max_bytes=settings.sql_max_bytes).to_json()
    finally:
        db.close()


def render(result: dict, fmt: str) -> str:
    columns, rows = result["columns"], result["rows"]
    if fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        return orjson.dumps(records, option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        writer.writerows(rows)
        return buffer.getvalue()
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _cell(value) -> str:
    value = jsonable(value)
    return "NULL" if value is None else str(value)
