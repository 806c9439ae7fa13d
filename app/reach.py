"""How a command reaches a log directory's database: through the server that holds it (over
HTTP, where its server.json says), or by opening the file itself. DuckDB lets one process hold
the file, so while a server runs its HTTP API is the only way in::

    target = open_target(logdir, None, settings, command="sql")
    if isinstance(target, Server):
        target.call("POST", "/api/sql", json={"sql": "SELECT 1"})  # {"columns": [...], ...}
    else:
        target.cursor().execute("SELECT 1")                         # the file, read-only

How long each command waits for a held file is chosen here once (WAIT_S), and so is what it
says when the holder is no server (HELD). The server.json contract is serverfile.py's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from . import serverfile
from .command import COMMAND
from .db.database import Database, DatabaseHeld
from .errors import CliffwatchError
from .lazy import LazyModule
from .monitor import Monitor, default_db

# `ingest --once` asks whether a server holds the folder; only talking to one needs httpx
httpx = LazyModule("httpx")

# Seconds a command waits while a process that is no server holds the database, asking again
# for a server between tries. A server that is starting holds the file a second or two before
# it writes server.json (its start-up opens the database, then the workers, then the file):
# a command that gave up at once would name as a stranger a holder that answers soon after.
WAIT_S = {
    "sql": 10.0,
    "export": 10.0,
    "alerts": 10.0,  # `alerts list`, which reads the file when no server runs
    "diagnose": 10.0,
    # a writer waits as long for a `sql` or `diagnose` that reads the file for a moment
    "ingest": 10.0,
}
# `serve` and `demo` only check that no server holds the folder (refuse_if_served); the server
# opens the file itself (server/serve.py). `replay` writes log files: it reaches neither.
TRY_S = 0.5  # each opening's own wait for DuckDB's lock
AGAIN_S = 0.3  # between a refused opening and the next look for a server

# what the holder answers none of, and what to do instead, when it is no server
HELD = {
    "sql": ("queries", f"Run `{COMMAND} serve --logdir DIR` to ingest and query at once, or "
                       "stop that process."),
    "export": ("export requests", f"Run `{COMMAND} serve` for that log directory and export "
                                  "through it, or stop that process."),
    "alerts": ("alert requests", f"Run `{COMMAND} serve --logdir DIR` (it runs the rules and "
                                 "answers `alerts`), or stop that process."),
    "diagnose": ("diagnosis requests", f"Run `{COMMAND} serve --logdir DIR` and diagnose "
                                       "through it, stop that process, or pass --db with "
                                       "another file."),
    "ingest": ("queries", "Stop that process (one process ingests a folder), or pass --db "
                          "with another file."),
}


@dataclass(frozen=True)
class Server:
    """A live server holding a database; ``logdir`` is the folder it serves."""

    url: str
    logdir: Path
    settings: object

    @property
    def headers(self) -> dict[str, str]:
        token = getattr(self.settings, "token", "")
        return {"Authorization": f"Bearer {token}"} if token else {}

    def call(self, method: str, path: str, *, timeout: float | None = 30.0,
             **request) -> dict:
        """The JSON answer of one request, or a CliffwatchError saying what went wrong."""
        return answer(self.url, lambda: httpx.request(
            method, f"{self.url}{path}", headers=self.headers, timeout=timeout, **request))

    def client(self):
        """One httpx.Client for many requests (an export's): no timeout, the token sent."""
        return httpx.Client(headers=self.headers, timeout=None)


def database_path(logdir: Path, db: Path | None) -> Path:
    return Path(db or default_db(Path(logdir))).resolve()


def find_server(logdir: Path, settings, db: Path | None = None) -> Server | None:
    """The live server holding LOGDIR's database (or ``db``), if one answers; None otherwise.
    Without a trusted server.json nothing is sent, and httpx is not even imported."""
    written = serverfile.read(database_path(logdir, db))
    if written is None:
        return None
    server = Server(written.url, Path(logdir), settings)
    try:
        httpx.get(f"{server.url}/api/health", headers=server.headers, timeout=2.0)
    except httpx.HTTPError:
        return None
    return server


def find_server_above(path: Path, settings) -> Server | None:
    """A live server whose log directory is ``path`` or a folder above it (`diagnose` of one
    run folder). Only each folder's own server.json is read, and only one this user wrote."""
    for folder in (path, *path.parents):
        server = find_server(folder, settings)
        if server:
            return server
    return None


def need_server(logdir: Path, db: Path | None, settings, doing: str) -> Server:
    """The server, for what only a server does (a silence, a test message): no file to open,
    so nothing to wait for."""
    server = find_server(logdir, settings, db)
    if server is None:
        raise CliffwatchError(
            f"no cliffwatch server is running for {logdir} ({database_path(logdir, db)}); "
            f"{doing} goes through it: start `{COMMAND} serve --logdir {logdir}` (webhooks "
            "with --webhook URL or CLIFFWATCH_WEBHOOK_URL), then run this again")
    return server


def refuse_if_served(logdir: Path, db: Path | None, settings, command: str) -> None:
    """A second ``serve`` or ``ingest`` on a folder a server holds would wait for the database
    and fail 15 s later with a traceback: say at once where the folder is served."""
    logdir = Path(logdir)
    server = find_server(logdir.resolve(), settings, db)
    if server is None:
        return
    then = ("open that address, or stop that server (Ctrl-C where it runs) before serving the "
            "folder again" if command == "serve" else
            f"that server reads the logs already: ask it with `{COMMAND} sql --logdir "
            f"{logdir} ...`, or stop it (Ctrl-C where it runs) before running `{command}`")
    raise CliffwatchError(f"{logdir} is already served by cliffwatch at {server.url} "
                          f"(database {database_path(logdir.resolve(), db)}); {then}")


def open_target(logdir: Path, db: Path | None, settings, *, command: str, find=None,
                open_file=None):
    """The live server, else the database file opened by ``open_file(path, wait_s)``
    (read-only by default), waiting WAIT_S[command] while a process that is no server holds
    it. ``find()`` looks for the server (default: the one beside the database)."""
    db_path = database_path(logdir, db)
    find = find or (lambda: find_server(logdir, settings, db))
    open_file = open_file or (lambda path, wait_s: read_only(path, settings, wait_s))
    deadline = time.monotonic() + WAIT_S[command]
    while True:
        server = find()
        if server:
            return server
        try:
            return open_file(db_path, TRY_S)
        except DatabaseHeld as held:
            if time.monotonic() > deadline:
                raise held_by_other(held, command) from None
            time.sleep(AGAIN_S)


def open_writer(logdir: Path, db: Path | None, settings, *, command: str,
                **monitor_args) -> Monitor:
    """The folder's Monitor (its database opened for writing), refused while a server holds
    it: a server that starts meanwhile is named, not reported as a stranger."""

    def refuse() -> None:
        refuse_if_served(logdir, db, settings, command)

    return open_target(logdir, db, settings, command=command, find=refuse,
                       open_file=lambda path, wait_s: Monitor.open(
                           logdir, settings, path, wait_s=wait_s, **monitor_args))


def read_only(db_path: Path, settings, wait_s: float = TRY_S) -> Database:
    # as in the server, ad-hoc SQL reads the tables and no file
    return Database(db_path, read_only=True, allowed_dirs=[], wait_s=wait_s,
                    memory_limit=settings.memory_limit)


def held_by_other(held: DatabaseHeld, command: str) -> DatabaseHeld:
    what, then = HELD[command]
    return DatabaseHeld(held.path, held.holder, (
        f"{held.path} is held by {held.who}, which answers no {what} (an `ingest` that keeps "
        f"following?). {then}"))


def answer(url: str, send) -> dict:
    try:
        response = send()
    except httpx.HTTPError as exc:
        raise CliffwatchError(f"the server at {url} did not answer ({exc})") from None
    return answer_json(url, response)


def answer_json(url: str, response) -> dict:
    """The JSON body of a 200 answer; any other answer as a CliffwatchError."""
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    if response.status_code == 200 and isinstance(payload, dict):
        return payload
    message = payload.get("error") if isinstance(payload, dict) else None
    if response.status_code == 401:
        message = (f"the server at {url} needs its token: set CLIFFWATCH_TOKEN (or "
                   "--token-file) to the one it was started with or printed at start-up")
    raise CliffwatchError(message or f"the server at {url} answered {response.status_code}")
