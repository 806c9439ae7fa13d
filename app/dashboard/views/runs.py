"""Runs page (``/?q=sweep3&status=live&offset=50&limit=50``): a page of runs at a time (live
first, then the most recently written), each with its state and latest numbers, refreshed
live; a search box and a live/finished filter; a run's name opens its Run page. The URL takes
/api/runs's parameters. The old alert link ``/?run=R&step=S`` lands here and moves on to the
Run page around S."""

import streamlit as st

if not __package__:  # Streamlit runs a page as a script, outside any package
    from itertools import takewhile
    from pathlib import Path

    # name the package this page's folder sits in (app.dashboard in a checkout,
    # cliffwatch.app.dashboard when installed) so the relative imports below reach the modules
    # the server loaded; the folder's own name is not part of it (it has no __init__.py)
    __package__ = ".".join(reversed([p.name for p in takewhile(
        lambda p: (p / "__init__.py").is_file(), Path(__file__).resolve().parents[1:])]))

from ..command import COMMAND
from ..errors import CliffwatchError
from ..read.runs import Ask
from . import backend, banner, picker, reads, unread, url, wording

RUN_PAGE = "views/run.py"
STATUS = {"all": "every run", "live": "live", "finished": "ended or idle"}
# runs a page shows unless its URL says ?limit=: each shown run's newest lines are read when
# it has new lines (two small queries a run), so fewer than /api/runs's 50. With 10,000 runs
# present, on 2 busy cores, a 25-run page cost 270 ms of CPU read afresh and 74 ms refreshed
# while its runs wrote nothing (reads.runs_page keeps their rows)
ROWS = 25
STATE_HELP = ("live; stalled: no line for longer than the stall rule's budget; finished or "
              "failed: run_end said so, or another trainer's log marks the end of training; "
              "idle: another trainer's log (it writes no run_end) that has not grown for "
              "--idle-after seconds without marking its end; stopped: already complete when "
              "cliffwatch first saw it (it finished before, or was copied in whole)")


def forward_old_link() -> None:
    """``/?run=R&step=S`` (links in messages sent before issue 9) -> ``/run?run=R&from&to``."""
    run = st.query_params.get("run")
    if not run:
        return
    params = {"run": run}
    view = url.parse_run_view(st.query_params)
    if view.step is not None:
        params["from"], params["to"] = url.around(view.step)
    st.switch_page(RUN_PAGE, query_params=params)


def waiting() -> None:
    logdir = wording.md(backend.logdir())
    st.info(f"Waiting for logs in {logdir} ... Each run is a folder there holding "
            "`metrics.jsonl` (one JSON object per line with an integer `step` and numbers, "
            'e.g. `{"step": 1, "loss": 0.79}`), and optionally `events.jsonl` and `run.json` '
            "(docs/log-format.md), or another trainer's log: any `*.jsonl`, "
            "`trainer_state.json`, TensorBoard's `events.out.tfevents.*`, llm.c's `main.log` "
            f"(docs/formats.md). `{COMMAND} replay samples/seed-cliff --to "
            f"{backend.logdir()}/seed-cliff` writes an example run.")


def ask_of_url(warn: bool = True) -> Ask:
    """The page of runs the URL asks for; a bad parameter is a warning and the first page."""
    try:
        return Ask.parse({k: st.query_params.get(k) for k in ("q", "status", "limit", "offset")},
                         page=ROWS)
    except CliffwatchError as exc:
        if warn:
            st.warning(f"{wording.md(exc)}; showing the first page of every run.")
        return Ask(limit=ROWS)


def write_filter(name: str, key: str) -> None:
    """A filter's on_change: its value into the URL, back to the first page."""
    value = st.session_state[key]
    url.set_params(**{name: None if value in ("", "all") else value, "offset": None})


def go_to(offset: int | None) -> None:
    url.set_params(offset=offset or None)


def filters(ask: Ask) -> None:
    """The search box and the live/finished filter, showing the URL's values."""
    state = st.session_state
    state["runs-q"] = ask.q or ""
    state["runs-status"] = ask.status or "all"
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    with left:
        picker.search_box("runs-q", on_change=write_filter, args=("q", "runs-q"))
    right.radio("show", list(STATUS), key="runs-status", horizontal=True,
                format_func=STATUS.get, on_change=write_filter, args=("status", "runs-status"))


@st.fragment(run_every=backend.REFRESH_S)
def live() -> None:
    ask = ask_of_url(warn=False)  # the URL as of now (paging changes it)
    found = reads.runs_page(ask)
    if found.table.empty:
        unread.notice()  # a folder whose only file is no log is no run, yet it is not read
        if not (found.total or ask.q or ask.status):
            waiting()
        elif not found.total:
            st.info("No run matches; clear the search (or show every run) to see them all.")
        else:
            st.info(f"This page is past the last of {found.total} run(s); Previous goes back.")
            paging(found)
        return
    table = found.table.assign(open=[url.run_url(run) for run in found.table["run"]])
    st.dataframe(table, hide_index=True, width="stretch", column_order=COLUMN_ORDER,
                 column_config=column_config())
    paging(found)
    stood = [f"{run} ({said})" for run, said in zip(table["run"], table["stood_in"],
                                                       strict=True) if isinstance(said, str)]
    if stood:  # as Compare says it: the value is the run's own metric of that kind
        st.caption(wording.md("Logged under another name, shown as loss or accuracy: "
                              f"{'; '.join(stood)}."))
    unread.notice()


# short headers, each with its meaning on hover: at 1,400 px the twelve columns fit, the last
# one included (issue 20, item 7: "last_seen" was cut off). Counts are numbers, so a click on
# the header sorts 12 after 5 (as text, "12 (1 open)" came before "5")
COLUMN_ORDER = ["open", "state", "last_step", "last_loss", "last_accuracy", "lines_per_min",
                "since_last_s", "incidents", "open_incidents", "alert_state", "lines",
                "last_seen"]


def column_config() -> dict:
    number = st.column_config.NumberColumn
    return {
        "open": st.column_config.LinkColumn("run", display_text=r"run=([^&]*)", width="medium",
                                            help="open the run's charts"),
        "state": st.column_config.TextColumn("state", help=STATE_HELP),
        "last_step": number("step", help="the newest line's step"),
        "last_loss": number("loss", help="the newest loss logged (of a run that logs none of "
                            "that name, its own loss by another name, said under the table)"),
        "last_accuracy": number("accuracy", help="the newest accuracy logged (or its own "
                                "accuracy by another name, said under the table)"),
        "since_last_s": number("quiet (s)", format="%.0f",
                               help="seconds since the monitor last saw the run's logs grow"),
        "lines_per_min": number(
            "lines/min", format="%.1f", help="lines a minute over the last 5 minutes, ending "
            "now: it falls while no line comes, to 0 after 5 minutes of silence; empty for a "
            "log with no time field (elapsed_s or time)"),
        "incidents": number("incidents", help="incidents diagnosed on the "
                            "run, open or over (Incidents page)"),
        "open_incidents": number("open", help="of those, the open ones: their "
                                 "episode reaches the newest line, so they may still grow"),
        "alert_state": st.column_config.TextColumn(
            "alert", help="firing > pending > silenced > ok (Alerts page)"),
        "lines": number("lines", help="metric lines stored"),
        "last_seen": st.column_config.DatetimeColumn(
            "last stored", format="YYYY-MM-DD HH:mm:ss", help="when a line of the run was "
            "last stored, by the monitor's clock"),
    }


def paging(found) -> None:
    """Previous/next and where this page sits: "10000 run(s) in runs; showing 51–75"."""
    ask, shown = found.ask, len(found.table)
    back = max(min(ask.offset, found.total) - (ask.limit or shown), 0)
    cols = st.columns([1, 1, 6], vertical_alignment="center")
    cols[0].button("Previous", key="runs-prev", disabled=ask.offset == 0, on_click=go_to,
                   args=(back,))
    cols[1].button("Next", key="runs-next", disabled=found.next is None, on_click=go_to,
                   args=(found.next,))
    if shown:
        cols[2].caption(f"{found.total} run(s) in {wording.md(backend.logdir())}; showing "
                        f"{ask.offset + 1}–{ask.offset + shown}, live first, then the most "
                        f"recently written; refreshed every {backend.REFRESH_S} s.")


def page() -> None:
    backend.state()
    forward_old_link()
    st.title("Runs")
    banner.health_warning()
    filters(ask_of_url())
    live()


backend.guarded(page)
