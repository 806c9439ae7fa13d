"""The pages' cached reads (app/read on this thread's cursor).

Reads are cached with ``st.cache_data`` keyed on ``series.version(cursor, run)``, which changes
only when the run gets lines, so a page refreshing an idle run every 2 s costs one cheap
query. Cached functions cannot take a cursor (it is not hashable and belongs to a thread):
they take the run and its version and get this thread's cursor themselves::

    ver = reads.version("seed-cliff")                  -> (2230, 4, 1024)
    reads.series("seed-cliff", ver, ("loss",), None, None, "step")  -> Series(frame, 2230, False)
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from .. import state as server_state
from .backend import cursor

POINTS = 1000  # points per chart's series: bounded whatever the run's length (issue 9)
PICKS = 50  # runs a run picker offers at once (a search box narrows them): never all 10,000


def version(run: str) -> tuple:
    from ..read import series as series_mod

    return tuple(series_mod.version(cursor(), run))


@st.cache_data(ttl=1.0, show_spinner=False)
def runs_page(ask):
    """One page of the Runs table (an ``app.read.runs.Ask``): never every run at once, and a
    short time to live (a page of runs has no single version to key on)."""
    from ..diagnose.rules import Watch
    from ..read import runs as runs_mod

    current = server_state.current()
    alerts = getattr(current, "alerts", None)  # its stall rule judges "stalled"
    return runs_mod.page(cursor(), ask, rules=getattr(alerts, "rules", None),
                         tails=_tails(str(current.monitor.db.path)),
                         idle_after=current.settings.idle_after,
                         watch=Watch.of(current.settings))


@st.cache_resource(show_spinner=False)
def _tails(db: str):
    """The Runs table's newest-lines rows of this database, kept across refreshes and tabs:
    a run that wrote nothing is not read again."""
    from ..read import runs as runs_mod

    return runs_mod.Tails()


@st.cache_data(ttl=1.0, show_spinner=False)
def find_runs(q: str | None, limit: int = PICKS) -> tuple[list[str], int]:
    """The names of the first ``limit`` runs matching ``q`` (as the Runs page orders them)
    and how many match: what a run picker offers, from the runs and files tables alone."""
    from ..read import runs as runs_mod

    table, total = runs_mod.listed(cursor(), runs_mod.Ask(q=q, limit=limit))
    return table["run"].astype(str).tolist(), total


def run_row(run: str) -> dict | None:
    """The Runs table's row of this one run (state, since_last_s, last_step, last_loss, ...),
    judged as the Runs page judges it; None when it is not listed."""
    from ..read import runs as runs_mod

    # a glob matching this name alone (any case): each character in brackets, so a name
    # holding "*", "?" or "[" is matched as itself
    exact = "".join(f"[{c}]" if c in "*?[" or (i == 0 and c not in "!^]") else c
                    for i, c in enumerate(run))
    table = runs_page(runs_mod.Ask(q=exact, limit=20)).table
    rows = table[table["run"] == run]
    return None if rows.empty else rows.iloc[0].to_dict()


def have_runs() -> bool:
    return find_runs(None, 1)[1] > 0


def run_exists(run: str) -> bool:
    from ..read import runs as runs_mod

    return runs_mod.exists(cursor(), run)


def metric_names(run: str, version: tuple) -> list[str]:
    return _names_and_axes(run, version)[0]


def axes(run: str, version: tuple) -> list[str]:
    return _names_and_axes(run, version)[1]


@st.cache_data(max_entries=256, show_spinner=False)
def _names_and_axes(run: str, version: tuple) -> tuple[list[str], list[str]]:
    # one read for both: a growing run has a new version, so both are read on each refresh
    from ..read import series as series_mod

    return series_mod.names_and_axes(cursor(), run)


@st.cache_data(max_entries=256, show_spinner=False)
def step_span(run: str, version: tuple):
    from ..read import series as series_mod

    return series_mod.step_span(cursor(), run)


@st.cache_data(max_entries=256, show_spinner=False)
def typical_gap(run: str, version: tuple):
    from ..read import series as series_mod

    return series_mod.typical_gap(cursor(), run)


@st.cache_data(max_entries=128, show_spinner=False)
def series(run: str, version: tuple, metrics: tuple, lo, hi, x: str, points: int = POINTS,
           gaps: bool = False):
    """``gaps``: with the gap panels' metrics too, in the same read (gaps() apart costs the
    plan query and a read of the same raw lines again)."""
    from ..read import series as series_mod

    return series_mod.series(cursor(), run, list(metrics), lo=lo, hi=hi, x=x, points=points,
                             gaps=gaps)


@st.cache_data(max_entries=128, show_spinner=False)
def markers(run: str, version: tuple, lo, hi, x: str) -> pd.DataFrame:
    from ..read import markers as markers_mod

    return markers_mod.markers(cursor(), run, lo=lo, hi=hi, x=x)


@st.cache_data(max_entries=128, show_spinner=False)
def strip(run: str, version: tuple, lo, hi, x: str) -> pd.DataFrame:
    from ..read import strip as strip_mod

    return strip_mod.bucket_strip(cursor(), run, lo=lo, hi=hi, x=x)


def system_version(run: str) -> tuple:
    """The run's samples' version (read/system.py): (0, 0, 0) without system.jsonl."""
    from ..read import system

    return system.version(cursor(), run)


@st.cache_data(max_entries=128, show_spinner=False)
def system_series(run: str, version: tuple, x: str, lo, hi) -> pd.DataFrame:
    """The System panel's rows (read/system.py): empty for a run without samples."""
    from ..read import system

    return system.series(cursor(), run, x=x, lo=lo, hi=hi)


@st.cache_data(max_entries=128, show_spinner=False)
def rank_times(run: str, version: tuple) -> pd.DataFrame:
    """Seconds per step of each rank (empty for a run without rank{N}.jsonl files)."""
    from ..read import ranks

    return ranks.step_times(cursor(), run)


@st.cache_data(ttl=1.0, show_spinner=False)
def incidents_table(run: str | None, kinds: tuple | None) -> pd.DataFrame:
    from ..read import incidents as incidents_mod

    return incidents_mod.incidents_table(cursor(), run=run, kinds=list(kinds) if kinds else None)
