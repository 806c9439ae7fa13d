"""The health banner over each page: an st.warning while ingest fails or lags the logs::

    Ingest is 95 s behind the log files, so the charts lag too. ...
"""

from __future__ import annotations

import streamlit as st

from .backend import state
from .wording import md

# ingest this far behind the files on disk is worth telling the reader: the charts lag too
LAG_WARN_S = 30.0


def health_warning() -> None:
    """An st.warning when ingest is failing or falling behind the logs on disk."""
    worker = getattr(state(), "worker", None)
    if worker is None:
        return
    failure = worker.failure
    if failure:
        st.warning(f"{md(failure)}. The charts show what was stored before it; "
                   "`GET /api/health` says when ingest recovers.")
        return
    lag = worker.lag_s()
    if lag > LAG_WARN_S:
        st.warning(f"Ingest is {lag:.0f} s behind the log files, so the charts lag too. "
                   "A burst of old logs is being caught up; if it stays, see `GET /api/health` "
                   "or raise --memory-limit / --chunk-bytes.")
