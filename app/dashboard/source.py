"""The pages' access to data and to the URL: this thread's cursor, cached reads, and the
query parameters that hold each page's state (so a link reproduces what is on screen)::

    /run?run=seed-cliff&from=1900&to=2100&metrics=loss,grad_norm&x=elapsed&smooth=0.8
    -> RunView(run="seed-cliff", lo=1900, hi=2100, metrics=["loss", "grad_norm"],
               x="elapsed", smooth=0.8), problems=[]
    /run?run=seed-cliff&from=abc&x=hours
    -> RunView(run="seed-cliff", lo=None, ...), problems=["from must be a whole step number
       such as 1200, not 'abc'; showing the whole run", "x must be step, elapsed or time ..."]

Reads are cached with ``st.cache_data`` keyed on ``series.version(cursor, run)``, which changes
only when the run gets lines, so a page refreshing an idle run every 2 s costs one cheap
query. Cached functions cannot take a cursor (it is not hashable and belongs to a thread):
they take the run and its version and get this thread's cursor themselves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb
import pandas as pd
import streamlit as st

from .. import state as server_state
from ..command import COMMAND
from ..errors import CliffwatchError

X_UNITS = ("step", "elapsed", "time")
MAX_STEP = 2**63 - 1  # a step is a BIGINT: a larger from/to is no step at all
# no smoothing unless asked: the page exists to show spikes, and an EMA drew the seed's loss
# spike to 13 as 2.5 (issue 20)
DEFAULT_SMOOTH = 0.0
MAX_SMOOTH = 0.99
# the panels of the Run page, top to bottom, when the run has them
# grad_norm and learning_rate: what other trainers' logs hold (HF, llm.c) besides the loss
DEFAULT_METRICS = ("loss", "accuracy", "hs_queue_depth", "tok_per_sec", "lr", "grad_norm",
                   "learning_rate", "gap_s", "gap_steps")
GAP_METRICS = ("gap_s", "gap_steps")
# ingest this far behind the files on disk is worth telling the reader: the charts lag too
LAG_WARN_S = 30.0
REFRESH_S = 2
POINTS = 1000  # points per chart's series: bounded whatever the run's length (issue 9)
PICKS = 50  # runs a run picker offers at once (a search box narrows them): never all 10,000


# ---- text on the page --------------------------------------------------------------------

# What Markdown (CommonMark, GFM, Streamlit's :color[] and $math$) reads in running text: a
# backslash before any of them shows it as itself. "-", "+", "=", "." and ")" mean something only
# at the start of a line (one is all md() leaves), so names like "lr-0.1" stay readable.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#|~$!])")
_LINE_START = re.compile(r"^(\s*\d*)([-+=.)])")  # a list item ("- ", "1. ") or a rule


def md(text) -> str:
    """Text from outside (a run or metric name, a URL parameter, an error that quotes a query)
    made safe for st.error/st.title/st.metric/help=...: those render Markdown, so a run named
    ``[login](https://evil.example)`` or ``![](https://evil.example/p.png)`` would become a link
    or an image loaded from another host. Escaped, it shows as typed, on one line::

        md("**x** [a](https://b)")  ->  "\\*\\*x\\*\\* \\[a\\]\\(https://b\\)"

    A bare URL in the text (https://b, www.b.c) is still made a link by Streamlit's GFM
    autolinking, which works on the text after escapes: its target is the text shown.
    """
    text = " ".join(str(text).splitlines())
    text = _MARKDOWN.sub(r"\\\1", text)
    return _LINE_START.sub(r"\1\\\2", text)


# ---- the server's state -----------------------------------------------------------------

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


# ---- cached reads -------------------------------------------------------------------------

def version(run: str) -> tuple:
    from ..read import series as series_mod

    return tuple(series_mod.version(cursor(), run))


@st.cache_data(ttl=1.0, show_spinner=False)
def runs_page(ask):
    """One page of the Runs table (an ``app.read.runs.Ask``): never every run at once, and a
    short time to live (a page of runs has no single version to key on)."""
    from ..read import runs as runs_mod

    current = server_state.current()
    alerts = getattr(current, "alerts", None)  # its stall rule judges "stalled"
    return runs_mod.page(cursor(), ask, rules=getattr(alerts, "rules", None),
                         tails=_tails(str(current.monitor.db.path)),
                         idle_after=current.settings.idle_after)


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


def clock(unix_s: float) -> str:
    """A time of day as the pages print it: 24-hour UTC, with the date."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(unix_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def have_runs() -> bool:
    return find_runs(None, 1)[1] > 0


def run_exists(run: str) -> bool:
    from ..read import runs as runs_mod

    return runs_mod.exists(cursor(), run)


def no_runs_yet() -> None:
    """What a page that needs a run says while the log directory has none."""
    st.info(f"No runs yet: waiting for logs in {md(logdir())} (see the Runs page).")


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


# ---- the URL --------------------------------------------------------------------------------

@dataclass
class RunView:
    """What the Run page shows, as its URL says; lo/hi are steps (inclusive, None = open)."""
    run: str | None = None
    lo: int | None = None
    hi: int | None = None
    metrics: list[str] | None = None  # None: the default panels the run has
    x: str = "step"
    smooth: float = DEFAULT_SMOOTH
    step: int | None = None  # the old alert link's /?run=R&step=S
    problems: list[str] = field(default_factory=list)


def parse_step(params: Mapping, name: str, problems: list[str]) -> int | None:
    text = (params.get(name) or "").strip()
    if not text:
        return None
    try:
        value = int(float(text)) if float(text).is_integer() else None
    except ValueError:
        value = None
    if value is None or not 0 <= value <= MAX_STEP:
        problems.append(f"{name} must be a whole step number such as 1200, not {text!r}; "
                        "showing the whole run")
        return None
    return value


def parse_run_view(params: Mapping) -> RunView:
    """The Run page's state from its query parameters; each bad value becomes a message in
    ``problems`` and its default is used instead."""
    problems: list[str] = []
    view = RunView(run=(params.get("run") or "").strip() or None, problems=problems)
    view.lo, view.hi = parse_step(params, "from", problems), parse_step(params, "to", problems)
    if view.lo is not None and view.hi is not None and view.lo > view.hi:
        problems.append(f"from ({view.lo}) is after to ({view.hi}); showing the whole run")
        view.lo = view.hi = None
    view.step = parse_step(params, "step", problems)
    names = [m.strip() for m in (params.get("metrics") or "").split(",") if m.strip()]
    view.metrics = names or None
    x = (params.get("x") or "step").strip()
    if x not in X_UNITS:
        problems.append(f"x must be one of {', '.join(X_UNITS)}, not {x!r}; using step")
        x = "step"
    view.x = x
    view.smooth = parse_smooth(params.get("smooth"), problems)
    return view


def parse_smooth(text, problems: list[str]) -> float:
    if text is None or not str(text).strip():
        return DEFAULT_SMOOTH
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= MAX_SMOOTH:
        problems.append(f"smooth must be a number from 0 (raw) to {MAX_SMOOTH}, not {text!r}; "
                        f"using {DEFAULT_SMOOTH}")
        return DEFAULT_SMOOTH
    return value


def parse_list(params: Mapping, name: str) -> list[str]:
    return [v.strip() for v in (params.get(name) or "").split(",") if v.strip()]


def around(step: int) -> tuple[int, int]:
    """The range the old alert link /?run=R&step=S opens (the same rule as the new link)."""
    from ..alerts.webhook import around as webhook_around

    return webhook_around(step)


def set_params(**values) -> None:
    """Write page state to the URL: None or "" removes a parameter."""
    for name, value in values.items():
        if value is None or value == "" or value == []:
            st.query_params.pop(name, None)
        elif isinstance(value, list | tuple):
            st.query_params[name] = ",".join(str(v) for v in value)
        else:
            st.query_params[name] = str(value)


def run_url(run: str, lo: int | None = None, hi: int | None = None) -> str:
    """A relative link to the Run page (relative, so a base path or proxy still works)."""
    from urllib.parse import quote, urlencode

    params = {"run": run}
    if lo is not None:
        params["from"] = int(lo)
    if hi is not None:
        params["to"] = int(hi)
    # %20, not +: the Runs table shows the link's run=... decoded, and "+" would stay a "+"
    return f"./run?{urlencode(params, quote_via=quote)}"
