"""Run page (``/run?run=NAME&from=STEP&to=STEP&metrics=a,b&x=step&smooth=0.6``): one run's
charts stacked on one x range, markers on each, the bucket strip under the loss chart.

The URL holds the page's state: the controls and a drag on any chart ("zoom") write from/to
there, and the charts re-read that range at full resolution. The charts sit in a fragment
that refreshes every 2 s without touching the URL, so the zoom survives each refresh.
"""

import time

import pandas as pd
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
from . import backend, banner, charts, export, panels, picker, reads, url, wording


def choose_run(view: url.RunView) -> str | None:
    """The run the URL names, or a message (and None) when it names none or an unknown one.
    The picker offers the runs matching its search box, never every run."""
    if view.run is None:
        if not reads.have_runs():
            backend.no_runs_yet()
            return None
        left, right = st.columns([2, 3])
        with left:
            q = picker.search_box("r-q")
        with right:
            pick = st.selectbox("Run", picker.matches(q), index=None, placeholder="pick a run")
        if pick:
            url.set_params(run=pick)
            st.rerun()
        return None
    if not reads.run_exists(view.run):
        names, total = reads.find_runs(None, 10)
        shown = wording.md(", ".join(names)) + (" ..." if total > len(names) else "")
        st.error(f"No run named {wording.md(repr(view.run))} in {wording.md(backend.logdir())}. "
                 "A run is a folder there holding metrics.jsonl or another trainer's log; the "
                 "Runs page (/) lists every run"
                 + (f" (e.g. {shown})" if names else "")
                 + f", as does `{COMMAND} sql --query runs`.")
        return None
    picker.remember(view.run)  # the SQL page pre-fills $run with it
    return view.run


def available(run: str, ver: tuple) -> list[str]:
    """Every panel the run can show: its metrics, then the two gap charts (named apart from
    a metric of the run's own that is named like one: panels.gap_panels)."""
    names = reads.metric_names(run, ver)
    return [*names, *panels.gap_panels(names)]


def chosen_metrics(view: url.RunView, options: list[str]) -> list[str]:
    """The URL's metrics the run has, in the URL's order; without any, the default panels."""
    if view.metrics is None:
        return panels.default_panels(options, backend.watch())
    return [m for m in view.metrics if m in options]


def warn_missing(view: url.RunView, options: list[str]) -> None:
    missing = [m for m in view.metrics or () if m not in options]
    if missing:
        st.warning(f"Run {wording.md(view.run)} has no metric {wording.md(', '.join(missing))}, "
                   f"so no chart for it; it has: {wording.md(', '.join(options))}.")


def write_param(name: str, key: str) -> None:
    """A control's on_change: its value into the URL (the charts read it from there)."""
    value = st.session_state[key]
    if name == "smooth":
        value = f"{value:g}"
    url.set_params(**{name: value})


def reset_zoom() -> None:
    url.set_params(**{"from": None, "to": None})


def controls(run: str, view: url.RunView, ver: tuple) -> None:
    """x unit, smoothing, metrics and range; each widget shows the URL's value and writes to it.
    (Widget values are set from the URL before each widget is drawn: the URL is the truth.)"""
    units = [u for u in url.X_UNITS if u in reads.axes(run, ver)] or ["step"]
    options = available(run, ver)
    state = st.session_state
    state["c-x"] = view.x if view.x in units else units[0]
    state["c-smooth"] = view.smooth
    state["c-metrics"] = chosen_metrics(view, options)
    top = st.columns([3, 2, 5])
    top[0].radio("x axis", units, key="c-x", horizontal=True, on_change=write_param,
                 args=("x", "c-x"))
    top[1].slider("smoothing", 0.0, url.MAX_SMOOTH, step=0.01, key="c-smooth",
                  on_change=write_param, args=("smooth", "c-smooth"),
                  help="TensorBoard's debiased EMA of the loss-like panels (loss, accuracy, "
                  "perplexity), a thin dark trend over the logged line; gap, queue, lr and "
                  "bucket panels are never smoothed")
    top[2].multiselect("metrics", options, key="c-metrics", on_change=write_param,
                       args=("metrics", "c-metrics"))


def zoom_row(run: str, view: url.RunView, ver: tuple) -> None:
    """from/to steps and Reset zoom. Drawn in the live fragment, so the placeholders (the
    run's first and last step) follow a live run (issue 20: they stayed at 469 while the
    last step was 519)."""
    state = st.session_state
    state["c-from"], state["c-to"] = view.lo, view.hi
    span = reads.step_span(run, ver) or (0, 0)
    low = st.columns([2, 2, 2, 5], vertical_alignment="bottom")
    low[0].number_input("from step", min_value=0, step=1, key="c-from", on_change=write_param,
                        args=("from", "c-from"), placeholder=str(span[0]))
    low[1].number_input("to step", min_value=0, step=1, key="c-to", on_change=write_param,
                        args=("to", "c-to"), placeholder=str(span[1]))
    low[2].button("Reset zoom", on_click=reset_zoom, disabled=view.lo is None and view.hi is None)
    low[3].caption("Drag across any chart to zoom; that range is read again at full resolution.")


def caption(run: str, view: url.RunView, series, ver: tuple) -> None:
    span = reads.step_span(run, ver)
    last = f", last step {span[1]}" if span else ""
    shown = "every line" if series.full else "a min/max band per bucket, so no spike is lost"
    if view.lo is not None or view.hi is not None:
        lo = view.lo if view.lo is not None else (span[0] if span else 0)
        hi = view.hi if view.hi is not None else (span[1] if span else "end")
        where = f"zoomed on steps {lo}–{hi}: "
    else:
        where = ""
    st.caption(f"{series.lines} lines{last} ({where}{shown})")


def draw(run: str, item: panels.Panel, view: url.RunView) -> None:
    """One panel with its PNG download; a drag on it zooms the whole page."""
    if item.metric in (panels.STRIP, panels.RANKS) or item.metric.startswith(panels.SYSTEM):
        # no brush: drawn, not zoomed from
        st.vega_lite_chart(spec=item.spec, width="stretch", height=item.height,
                           alt=f"{item.metric} of {run}")
        return
    key = f"chart-{item.metric}-{view.x}-{view.lo}-{view.hi}"  # a new range: a fresh brush
    event = st.vega_lite_chart(spec=item.spec, on_select="rerun", key=key, width="stretch",
                               height=item.height, alt=f"{item.metric} chart of {run}")
    zoom = charts.selected_steps((event.selection or {}).get(charts.ZOOM), item.zoom_rows,
                                 view.x)
    if zoom is not None:
        url.set_params(**{"from": zoom[0], "to": zoom[1]})
        st.rerun(scope="app")  # the controls outside this fragment show the new range
    st.download_button("PNG", data=lambda: export.png(item.spec),
                       file_name=f"{run}-{item.metric}.png", mime="image/png",
                       key=f"png-{item.metric}", on_click="ignore",
                       help=f"download the {wording.md(item.metric)} chart as an image")


def untimed(run: str, ver: tuple, metrics: tuple, drawn: panels.Panels) -> bool:
    """Whether the gap_s panel was asked for but cannot be drawn: the run's log has no time
    field at all (HF's trainer_state.json, llm.c's main.log), so no gap has seconds."""
    return ("gap_s" in metrics and all(item.metric != "gap_s" for item in drawn.charts)
            and not {"elapsed", "time"} & set(reads.axes(run, ver)))


def untimed_note(run: str) -> None:
    st.info(f"Run {wording.md(run)}'s log has no time field (`elapsed_s` or `time`, or an "
            "alias such as `elapsed_time` or `timestamp`; docs/formats.md), so time gaps "
            "(gap_s) cannot be shown; gap_steps shows the steps between lines.")


def stall_banner(run: str) -> None:
    """Above the charts, while the run is stalled: since when, and its last line (issue 20:
    a firing stall's link opened a page whose charts simply ended); for a log that stopped
    before cliffwatch started, that it did. Drawn by the live fragment, so it comes and goes
    with the run without a reload."""
    row = reads.run_row(run)
    if row is not None and row.get("state") == "stalled":
        st.error(stalled_text(run, row))
    elif row is not None and row.get("state") == "stopped":
        st.info(stopped_text(run, row))


def stopped_text(run: str, row: dict) -> str:
    """A log silent since before cliffwatch first saw it (issue 20, item 4): no stall."""
    when = wording.clock(time.time() - float(row["since_last_s"]))
    # "before cliffwatch started" read wrong for a log copied in while it ran (the llm.c log
    # of a review, last written a minute after the server's start)
    return (f"Run {wording.md(run)} was already complete when cliffwatch first saw it (it "
            f"finished before, or was copied in whole; last written {when}); nothing was "
            "written since. The charts go on by themselves if it writes again.")


def stalled_text(run: str, row: dict) -> str:
    quiet = float(row["since_last_s"])
    when = wording.clock(time.time() - quiet)
    values = ", ".join(f"{name} {row[key]:.4g}" for key, name in (
        ("last_loss", "loss"), ("last_accuracy", "accuracy")) if pd.notna(row.get(key)))
    step = row.get("last_step")
    last = (f"step {int(step)}" if pd.notna(step) else "no step") + (
        f", {wording.md(values)}" if values else "")
    alert = " A stall alert is firing." if row.get("alert_state") == "firing" else ""
    return (f"**Stalled**: run {wording.md(run)} has written no line for {quiet:,.0f} s, "
            f"since {when}. Its last line: {last}.{alert} The charts end there; they go on "
            "by themselves when the run writes again.")


@st.fragment(run_every=backend.REFRESH_S)
def live(run: str) -> None:
    view = url.parse_run_view(st.query_params)  # the URL as of now (a zoom changes it)
    stall_banner(run)
    ver = reads.version(run)
    controls(run, view, ver)  # in the fragment, under the banner: the banner tops the page
    metrics = tuple(chosen_metrics(view, available(run, ver)))
    drawn = panels.run_panels(run, ver, metrics, view.x, view.smooth, view.lo, view.hi)
    zoom_row(run, view, ver)
    caption(run, view, drawn, ver)
    if not drawn.charts:
        st.info(f"Run {wording.md(run)} has no lines to chart in this range yet; Reset zoom "
                "shows the whole run.")
    note = untimed(run, ver, metrics, drawn)
    for item in drawn.charts:
        if note and item.metric == "gap_steps":  # where the gap_s panel would have been
            untimed_note(run)
            note = False
        draw(run, item, view)
    if note:
        untimed_note(run)
    system_panel(run, view, drawn)


def system_panel(run: str, view: url.RunView, drawn: panels.Panels) -> None:
    """What the machine was doing (the run's system.jsonl), under the training panels on
    their x range; nothing for a run without samples."""
    version = reads.system_version(run)
    if not version[1]:
        return
    domain = tuple(drawn.x_domain) if drawn.x_domain else None
    found = panels.system_panels(run, version, view.x, view.lo, view.hi, domain)
    if found:
        st.subheader("System")
    for item in found:
        draw(run, item, view)


def page() -> None:
    backend.state()
    view = url.parse_run_view(st.query_params)
    if view.step is not None and view.lo is None and view.hi is None:
        lo, hi = url.around(view.step)
        url.set_params(**{"from": lo, "to": hi, "step": None})
        view = url.parse_run_view(st.query_params)
    for problem in view.problems:
        st.warning(wording.md(problem))
    run = choose_run(view)
    if run is None:
        return
    st.title(wording.md(run))
    banner.health_warning()
    ver = reads.version(run)
    if reads.step_span(run, ver) is None:
        st.info(f"Run {wording.md(run)} has no metric lines yet; its charts appear with the "
                "first training line of its log (metrics.jsonl, or another trainer's log).")
        return
    warn_missing(view, available(run, ver))
    live(run)


backend.guarded(page)
