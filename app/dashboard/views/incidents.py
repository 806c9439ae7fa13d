"""Incidents page (``/incidents?run=NAME&kind=spike,cliff``): the diagnosis report across runs,
filterable by run and kind; each incident links to the Run page zoomed on it."""

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
from . import picker, source

KINDS = tuple(KIND_RANK)  # every kind diagnosis reports (a divergence was missing here)
ALL = "every run"


def write_param(name: str, key: str) -> None:
    value = st.session_state[key]
    source.set_params(**{name: None if value == ALL else value})


def filters() -> tuple[str | None, list[str]]:
    """Run and kinds from the URL, in widgets that write back to it. The runs offered are the
    first matches of the search box (and the run the URL names), never every run."""
    run = st.query_params.get("run")
    if run and not source.run_exists(run):
        st.warning(f"No run named {source.md(repr(run))}; showing every run (the Runs page "
                   "lists them).")
        run = None
    kinds = [k for k in source.parse_list(st.query_params, "kind") if k in KINDS]
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


@st.fragment(run_every=source.REFRESH_S)
def live(run: str | None, kinds: list[str]) -> None:
    table = source.incidents_table(run, tuple(kinds) or None)
    if table.empty:
        st.info("No incidents" + (f" in {source.md(run)}" if run else "") + " so far: detection "
                "looks for loss spikes, divergences, accuracy cliffs, stalls and NaN/inf as lines "
                "arrive.")
        return
    table = table.assign(open=[source.run_url(r, lo, hi) for r, lo, hi in
                               zip(table["run"], table["from_step"], table["to_step"],
                                   strict=True)])
    st.dataframe(
        table, hide_index=True, width="stretch",
        column_order=["open", "run", "kind", "metric", "step", "end_step", "value", "baseline",
                      "causes", "evidence", "detected_at"],
        column_config={
            "open": st.column_config.LinkColumn(
                "chart", display_text="open", help="the Run page zoomed on this incident"),
            "evidence": st.column_config.TextColumn("evidence", width="large"),
        })
    st.caption(f"{len(table)} incident(s).")


def page() -> None:
    source.state()
    st.title("Incidents")
    source.health_warning()
    if not source.have_runs():
        source.no_runs_yet()
        return
    live(*filters())


source.guarded(page)
