"""`python -m app serve`: one process that owns the database, runs ingest, serves the
dashboard and /api.

Built on Streamlit's ``st.App``. The database is opened and the ingest worker's first
catch-up started before Streamlit is even imported (catchup.py); the lifespan waits for it and
starts the other workers before the first browser connects; the same process answers /api/*
(routes.py). A file
``server.json`` beside the database tells the CLI where to send queries (serverfile.py)::

    {"pid": 4242, "url": "http://127.0.0.1:8501", "logdir": "/home/me/runs"}

It never holds the token. Requests pass through ``guard.py`` first: a Host that is not this
server's, a foreign Origin, or (off loopback) a missing token is refused before Streamlit or
/api sees it. Off loopback without ``--token``, one is generated and printed in the URL::

    cliffwatch: dashboard and API at http://127.0.0.1:8501/?token=Jx3...
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import sys
from pathlib import Path

from .. import serverfile
from ..errors import CliffwatchError
from ..ingest.worker import IngestWorker
from ..monitor import Monitor, default_db
from ..settings import describe
from .catchup import CatchUp
from .guard import LOGOUT, Guard, is_loopback

# Only what opens the database and starts the first catch-up is imported above: the web
# stack and the other workers are imported while it runs (catchup.py); pandas and httpx only
# by the workers' own threads, once the server answers.
DASHBOARD = Path(__file__).resolve().parents[1] / "dashboard" / "main.py"
log = logging.getLogger("cliffwatch.server")


def build(db_path: Path, settings, *, url: str, guard: Guard, rules: tuple[list, str],
          monitor: Monitor, first: CatchUp):
    """The app on ``monitor``, opened already (``serve`` opens it before it prints the URL, so
    a damaged file stops it with a message instead of a traceback after), whose ingest worker
    is catching up in ``first``'s thread; the lifespan waits for that before it serves."""
    import streamlit as st
    from starlette.middleware import Middleware

    from .. import state
    from ..alerts.delivery import DeliveryWorker
    from ..alerts.judge_worker import AlertWorker
    from ..diagnose.worker import DiagnosisWorker
    from ..tiler import TileWorker
    from .guard import GuardMiddleware
    from .page_base import PageBaseMiddleware
    from .routes import ROUTES

    rules, source = rules
    worker = first.worker

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        # the first tick: the server answers once every file had its budget
        if not first.wait():  # a Ctrl-C meanwhile: uvicorn stops as soon as this returns
            log.warning("stopped during the first catch-up; what it read is "
                        "stored, and the next start reads on from there")
            try:
                yield None
            finally:
                monitor.close()
            return
        worker.follow()
        diagnosis = DiagnosisWorker(monitor.db, settings)
        worker.listeners.append(diagnosis.poke)
        diagnosis.start()
        tiles = TileWorker(monitor.db)  # chart rollups; ingest only pokes it
        worker.listeners.append(tiles.poke)
        tiles.start()
        # ingest and diagnosis only poke: rules run in their own thread, webhooks in theirs
        # re-sends to an Alertmanager cover only the rules in force (a removed rule resolves)
        delivery = DeliveryWorker(monitor.db, settings, url, rule_names=[r.name for r in rules])
        alerts = AlertWorker(monitor.db, rules, settings, delivery.targets,
                             on_outbox=delivery.poke, source=source)
        worker.listeners.append(alerts.poke)
        diagnosis.listeners.append(alerts.poke)
        delivery.start()
        alerts.start()
        state.set_current(state.ServerState(monitor, worker, settings, alerts=alerts,
                                            delivery=delivery, diagnosis=diagnosis,
                                            tiles=tiles))
        serverfile.write(db_path, {"pid": os.getpid(), "url": url,
                                   "logdir": str(monitor.logdir)})
        log.warning("cliffwatch serving %s at %s", monitor.logdir, url)
        try:
            yield None
        finally:
            serverfile.remove(db_path)
            state.set_current(None)
            for background in (diagnosis, tiles, alerts):
                background.stop_soon()
            worker.stop()
            diagnosis.stop()
            tiles.stop()
            alerts.stop()
            delivery.stop()
            monitor.close()

    return st.App(str(DASHBOARD), lifespan=lifespan, routes=ROUTES,
                  middleware=[Middleware(GuardMiddleware, guard=guard),
                              Middleware(PageBaseMiddleware)])


def quieter_streamlit_polling() -> None:
    """Streamlit polls its config and secrets files every 0.2 s in its own threads, whatever
    server.fileWatcherType says: 0.4% of a core in an otherwise idle server (issue 12 wants
    2% in all with 10,000 runs). Every 5 s is soon enough for an edit to .streamlit/config.toml.
    The setting is Streamlit's private constant: tests/app/test_requirements.py fails if an
    upgrade renames it."""
    from streamlit.watcher import polling_path_watcher

    polling_path_watcher._POLLING_PERIOD_SECS = 5.0


def no_component_scan() -> None:
    """Streamlit's runtime reads every installed package's metadata at start, on the server's
    thread, looking for custom components (0.115 s among this venv's 97 packages, timed once
    by hand; more in a training environment's hundreds); our pages use none (issue 23: start
    to first chart). ``discover_and_register_components`` is Streamlit's own method:
    tests/app/test_server_start.py fails if an upgrade renames it or calls another."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    def nothing_to_discover(self, *, start_file_watching: bool = True) -> None:
        return None

    BidiComponentManager.discover_and_register_components = nothing_to_discover


def nodelay_sockets() -> None:
    """TCP_NODELAY on every connection the server accepts. Streamlit binds its listening
    socket as ``socket.socket(family)``, whose proto is 0, and asyncio sets TCP_NODELAY only
    on sockets whose proto says TCP: so uvicorn's two writes of each answer (headers, then
    body) met Nagle's algorithm, and the body waited for the client's delayed ACK, 40 ms a
    request on a keep-alive connection (issue 23; bench/latency.py). A listening socket's
    TCP_NODELAY is inherited by each socket it accepts (Linux, BSD). ``_bind_socket`` is
    Streamlit's private function: tests/app/test_server_nodelay.py fails if an upgrade
    renames it."""
    from streamlit.web.server.starlette import starlette_server

    bind = starlette_server._bind_socket
    if getattr(bind, "nodelay", False):
        return

    def bind_nodelay(address: str, port: int, backlog: int) -> socket.socket:
        return nodelay(bind(address, port, backlog))

    bind_nodelay.nodelay = True
    starlette_server._bind_socket = bind_nodelay


def nodelay(sock: socket.socket) -> socket.socket:
    if sock.family in (socket.AF_INET, socket.AF_INET6):  # not a Unix socket
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def check_alerts(settings, logdir: Path, url: str) -> tuple[list, str]:
    """Rules and webhooks checked before the server starts: a mistake stops `serve` with a
    message saying what to fix, not a traceback from inside the server."""
    from ..alerts.delivery import DeliveryWorker
    from ..alerts.rules import load_rules
    from ..alerts.targets import targets

    rules, source = load_rules(Path(settings.rules) if settings.rules else None, logdir)
    DeliveryWorker(None, settings, url)  # checks --webhook-format and each URL; sends nothing
    shown = ", ".join(t.label for t in targets(settings))
    print(f"cliffwatch: alert rules from {source}; notifications to {shown}", file=sys.stderr)
    return rules, source


def serve(logdir: Path, db: Path | None, host: str, port: int, poll: bool, settings) -> None:
    logdir = Path(logdir).resolve()
    if not logdir.is_dir():
        raise CliffwatchError(f"log directory {logdir} does not exist; create it or pass "
                              "--logdir with the folder your trainer writes to")
    _check_port(host, port)
    db_path = Path(db or default_db(logdir)).resolve()
    token = settings.token or (None if is_loopback(host) else secrets.token_urlsafe(32))
    guard = Guard.for_bind(host, port, settings.allowed_hosts, token,
                           settings.session_hours)
    url = local_url(host, port)
    print(f"cliffwatch: watching {logdir}, database {db_path}", file=sys.stderr)
    print(f"cliffwatch settings: {describe(settings)}", file=sys.stderr)
    # a damaged database file stops here, with what to do, before the URL is announced
    with Monitor.open(logdir, settings, db_path) as monitor, \
            CatchUp(IngestWorker(monitor.tailer, settings, poll=poll)) as first:
        rules = check_alerts(settings, logdir, url)  # a mistake: stopped once the tick ends
        _announce(url, token, settings)
        app = build(db_path, settings, url=url, guard=guard, rules=rules, monitor=monitor,
                    first=first)
        sys.argv[0] = str(DASHBOARD)  # st.App.run() treats argv[0] as the app's script
        quieter_streamlit_polling()
        no_component_scan()
        nodelay_sockets()
        app.run(config=_streamlit_config(host, port, guard))


def _announce(url: str, token: str | None, settings) -> None:
    if token and not settings.token:
        # generated, so the user can only learn it here (as Jupyter does)
        print(f"cliffwatch: dashboard and API at {url}/?token={token}", file=sys.stderr)
    else:
        how = " (token from CLIFFWATCH_TOKEN, --token-file or --token)" if token else ""
        print(f"cliffwatch: dashboard and API at {url}{how}", file=sys.stderr)
    if token:
        print(f"cliffwatch: a browser's sign-in lasts {settings.session_hours:g} h "
              f"(--session-hours); sign out at {url}{LOGOUT}", file=sys.stderr)


def _streamlit_config(host: str, port: int, guard: Guard) -> dict:
    return {"server.port": port, "server.address": host, "server.headless": True,
            "browser.gatherUsageStats": False, "server.fileWatcherType": "none",
            "global.developmentMode": False, "client.toolbarMode": "minimal",
            # a bug of ours shows its type on the page; the trace goes to the log
            "client.showErrorDetails": "type",
            # our line above names the URL (with its token); Streamlit's would not, and for
            # a wildcard bind it asks a web service for the external address
            "logger.hideWelcomeMessage": True, **streamlit_protection(guard)}


def streamlit_protection(guard: Guard) -> dict:
    """Streamlit's own checks, kept on and in line with the guard in front of them (which
    decides): same-origin only, XSRF tokens on uploads, and the same Host names for its
    websocket where a list can say them (a wildcard bind accepts any IP literal)."""
    return {"server.enableCORS": True, "server.enableXsrfProtection": True,
            "server.corsAllowedOrigins": [],
            "server.allowedHosts": [] if guard.any_ip else sorted(guard.names)}


def local_url(host: str, port: int) -> str:
    """The URL this machine reaches the server at: loopback for a wildcard bind."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise CliffwatchError(f"cannot listen on {host}:{port} ({exc.strerror}); another "
                                  "server may be running there: pass --port") from None
