"""The pages' link to the server they run in: its state (or a message while it starts or
after it went away), this thread's cursor, the log directory, and a page body's errors shown
as messages, never a traceback::

    backend.state()           -> ServerState(monitor=..., worker=..., alerts=..., ...)
    backend.guarded(body, x)  -> body(x); a CliffwatchError becomes an st.error
"""

from __future__ import annotations

import duckdb
import streamlit as st

from .. import state as server_state
from ..command import COMMAND
from ..diagnose.rules import Watch
from ..errors import CliffwatchError
from .wording import md

REFRESH_S = 2  # seconds between a live page's refreshes


def state():
    """The server's state, or an explanation on the page (and the script stops) while the
    server is starting or after it went away."""
    try:
        return server_state.current()
    except CliffwatchError as exc:
        st.info(f"cliffwatch: {md(exc)}.")
        st.stop()


def cursor():
    return server_state.current().monitor.db.cursor()


def logdir() -> str:
    return str(state().monitor.logdir)


def watch() -> Watch:
    """The metrics diagnosis and the alert rules watch, which the Run page draws by default."""
    return Watch.of(state().settings)


def guarded(body, *args) -> None:
    """Run a page's body; a user-facing error or a database that went away is a message,
    never a traceback."""
    try:
        body(*args)
    except CliffwatchError as exc:
        st.error(md(exc))
    except duckdb.Error as exc:
        st.warning(f"The monitor's database stopped answering ({type(exc).__name__}: {md(exc)}). "
                   f"If the server was stopped, start it again with `{COMMAND} serve`, "
                   "then reload this page.")


def no_runs_yet() -> None:
    """What a page that needs a run says while the log directory has none."""
    st.info(f"No runs yet: waiting for logs in {md(logdir())} (see the Runs page).")
