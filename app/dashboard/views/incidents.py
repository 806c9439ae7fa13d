"""Incidents page (``/incidents?run=NAME&kind=spike,cliff``): the diagnosis report across runs,
filterable by run and kind; each incident links to the Run page zoomed on it. The incident
selected in the table (the first until one is) is written out in full under it, its causes
and every line of its evidence, which a table cell cuts off::

    spike in loss at step 2029 (seed-cliff), through step 2035: 13 against 0.7392
    Likely cause: checkpoint

    Why: checkpoint at step 2000 blocked the training loop for 155.2 s, ...

Files not read are named above the table: a run never looks clean for want of reading it."""

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

from ..diagnose.diagnosis import KIND_RANK
from . import backend, banner, picker, reads, unread, url, wording

KINDS = tuple(KIND_RANK)  # every kind diagnosis reports (a divergence was missing here)
ALL = "every run"


def write_param(name: str, key: str) -> None:
    value = st.session_state[key]
    url.set_params(**{name: None if value == ALL else value})


def filters() -> tuple[str | None, list[str]]:
    """Run and kinds from the URL, in widgets that write back to it. The runs offered are the
    first matches of the search box (and the run the URL names), never every run."""
    run = st.query_params.get("run")
    if run and not reads.run_exists(run):
        st.warning(f"No run named {wording.md(repr(run))}; showing every run (the Runs page "
                   "lists them).")
        run = None
    picker.remember(run)
    kinds = [k for k in url.parse_list(st.query_params, "kind") if k in KINDS]
    st.session_state["i-run"], st.session_state["i-kind"] = run or ALL, kinds
    search, left, right = st.columns([2, 2, 3])
    with search:
        q = picker.search_box("i-q")
    with left:
        st.selectbox("run", picker.matches(q, keep=[ALL, *([run] if run else [])]), key="i-run",
                     on_change=write_param, args=("run", "i-run"))
    right.multiselect("kind", KINDS, key="i-kind", on_change=write_param,
                      args=("kind", "i-kind"), placeholder="every kind")
    return run, kinds


@st.fragment(run_every=backend.REFRESH_S)
def live(run: str | None, kinds: list[str]) -> None:
    missed = unread.notice((run,) if run else None)
    table = reads.incidents_table(run, tuple(kinds) or None)
    if table.empty:
        read = " in the lines read" if missed else ""
        st.info("No incidents" + (f" in {wording.md(run)}" if run else "") + f"{read} so far: "
                "detection looks for loss spikes, divergences, accuracy cliffs, stalls, "
                "NaN/inf, a loss that never changes and a run that failed, as lines arrive.")
        return
    table = table.assign(open=[url.run_url(r, lo, hi) for r, lo, hi in
                               zip(table["run"], table["from_step"], table["to_step"],
                                   strict=True)])
    picked = st.dataframe(
        table, hide_index=True, width="stretch", on_select="rerun",
        selection_mode="single-row", key="i-table",
        # the evidence last: what a narrow page cuts is what is written in full below (with
        # when the incident was detected)
        column_order=["open", "run", "kind", "metric", "step", "end_step", "value", "baseline",
                      "causes", "evidence"],
        column_config={
            "open": st.column_config.LinkColumn(
                "chart", display_text="open", help="the Run page zoomed on this incident"),
            "run": st.column_config.TextColumn("run", width="medium"),
            "causes": st.column_config.TextColumn("causes", width="medium"),
            "evidence": st.column_config.TextColumn(
                "evidence", width="large", help="select a row: its evidence is written out in "
                "full under the table"),
        })
    rows = picked.selection.rows if picked is not None else []
    st.caption(f"{len(table)} incident(s); select one to read its causes and evidence in "
               "full below.")
    in_full(table.iloc[rows[0] if rows and rows[0] < len(table) else 0])


def in_full(incident) -> None:
    """One incident's headline, causes and each evidence line, as text that wraps."""
    through = (f", through step {incident['end_step']}"
               if incident["end_step"] != incident["step"] else "")
    against = (f": {number(incident['value'])} against {number(incident['baseline'])}"
               if pd.notna(incident["value"]) and pd.notna(incident["baseline"]) else "")
    detected = (f"; detected at {pd.Timestamp(incident['detected_at']):%Y-%m-%d %H:%M:%S}"
                if pd.notna(incident["detected_at"]) else "")
    st.markdown(f"**{wording.md(incident['kind'])} in {wording.md(incident['metric'])} at step "
                f"{incident['step']}** ({wording.md(incident['run'])}){through}{against}"
                f"{detected}")
    # read/incidents gives causes joined by ", " and the evidence lines by " "
    causes = wording.md(text(incident["causes"])) or "none named"
    evidence = wording.md(text(incident["evidence"]))
    st.markdown(f"Likely cause: **{causes}**" + (f"\n\nWhy: {evidence}" if evidence else ""))


def number(value) -> str:
    return wording.md(f"{value:.4g}")


def text(value) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def page() -> None:
    backend.state()
    st.title("Incidents")
    banner.health_warning()
    if not reads.have_runs():
        backend.no_runs_yet()
        return
    live(*filters())


backend.guarded(page)
