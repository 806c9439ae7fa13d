"""`python -m app serve`: one process that owns the database, runs ingest, serves the
dashboard and /api.

Built on Streamlit's ``st.App``: its lifespan opens the database and starts the ingest worker
before the first browser connects; the same process answers /api/* (routes.py). A file
``server.json`` beside the database tells the CLI where to send queries::

    {"pid": 4242, "url": "http://127.0.0.1:8501", "logdir": "/home/me/runs"}
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from pathlib import Path

import orjson

from app.diagnose.worker import DiagnosisWorker
from app.errors import CliffwatchError
from app.ingest.worker import IngestWorker
from app.monitor import Monitor, default_db
from app.server import state
from app.server.routes import ROUTES
from app.settings import describe

DASHBOARD = Path(__file__).resolve().parents[1] / "dashboard" / "main.py"
log = logging.getLogger("cliffwatch.server")


def server_file(db_path: Path) -> Path:
    return Path(db_path).parent / "server.json"


def build(logdir: Path, db_path: Path, settings, *, poll: bool, url: str):
    import streamlit as st

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        monitor = Monitor.open(logdir, settings, db_path)
        worker = IngestWorker(monitor.tailer, settings, poll=poll)
        worker.start()
        diagnosis = DiagnosisWorker(monitor.db, settings)
        worker.listeners.append(diagnosis.poke)
        diagnosis.start()
        state.set_current(state.ServerState(monitor, worker, settings))
        info = server_file(db_path)
        info.write_bytes(orjson.dumps({"pid": os.getpid(), "url": url,
                                       "logdir": str(monitor.logdir)}))
        log.warning("cliffwatch serving %s at %s", monitor.logdir, url)
        try:
            yield None
        finally:
            info.unlink(missing_ok=True)
            state.set_current(None)
            worker.stop()
            diagnosis.stop()
            monitor.close()

    return st.App(str(DASHBOARD), lifespan=lifespan, routes=ROUTES)


def serve(logdir: Path, db: Path | None, host: str, port: int, poll: bool, settings) -> None:
    logdir = Path(logdir).resolve()
    if not logdir.is_dir():
        raise CliffwatchError(f"log directory {logdir} does not exist; create it or pass "
                              "--logdir with the folder your trainer writes to")
    _check_port(host, port)
    db_path = Path(db or default_db(logdir)).resolve()
    url = f"http://{host}:{port}"
    print(f"cliffwatch: watching {logdir}, database {db_path}", file=sys.stderr)
    print(f"cliffwatch settings: {describe(settings)}", file=sys.stderr)
    print(f"cliffwatch: dashboard and API at {url}", file=sys.stderr)
    app = build(logdir, db_path, settings, poll=poll, url=url)
    sys.argv[0] = str(DASHBOARD)  # st.App.run() treats argv[0] as the app's script
    app.run(config={"server.port": port, "server.address": host, "server.headless": True,
                    "browser.gatherUsageStats": False, "server.fileWatcherType": "none",
                    "global.developmentMode": False, "client.toolbarMode": "minimal"})


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise CliffwatchError(f"cannot listen on {host}:{port} ({exc.strerror}); another "
                                  "server may be running there: pass --port") from None
