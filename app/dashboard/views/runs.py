"""Runs page (``/``): every run, its state and latest numbers, refreshed live; a run's name
opens its Run page. The old alert link ``/?run=R&step=S`` lands here and moves on to the Run
page around S."""

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
from . import source

RUN_PAGE = "views/run.py"


def forward_old_link() -> None:
    """``/?run=R&step=S`` (links in messages sent before issue 9) -> ``/run?run=R&from&to``."""
    run = st.query_params.get("run")
    if not run:
        return
    params = {"run": run}
    view = source.parse_run_view(st.query_params)
    if view.step is not None:
        params["from"], params["to"] = source.around(view.step)
    st.switch_page(RUN_PAGE, query_params=params)


def waiting() -> None:
    logdir = source.md(source.logdir())
    st.info(f"Waiting for logs in {logdir} ... Each run is a folder there holding "
            "`metrics.jsonl` (one JSON object per line with an integer `step` and numbers, "
            'e.g. `{"step": 1, "loss": 0.79}`), and optionally `events.jsonl` and `run.json` '
            f"(docs/log-format.md). `{COMMAND} replay samples/seed-cliff --to "
            f"{source.logdir()}/seed-cliff` writes an example run.")


@st.fragment(run_every=source.REFRESH_S)
def live() -> None:
    table = source.runs_table()
    if table.empty:
        waiting()
        return
    table = table.assign(open=[source.run_url(run) for run in table["run"]])
    st.dataframe(
        table, hide_index=True, width="stretch",
        column_order=["open", "state", "last_step", "last_loss", "last_accuracy",
                      "lines_per_min", "since_last_s", "open_incidents", "alert_state",
                      "lines", "last_seen"],
        column_config={
            "open": st.column_config.LinkColumn("run", display_text=r"run=([^&]*)",
                                                help="open the run's charts"),
            "since_last_s": st.column_config.NumberColumn("since last line (s)", format="%.0f"),
            "lines_per_min": st.column_config.NumberColumn("lines/min", format="%.1f"),
            "open_incidents": st.column_config.NumberColumn("open incidents"),
        })
    st.caption(f"{len(table)} run(s) in {source.md(source.logdir())}; refreshed every "
               f"{source.REFRESH_S} s.")


def page() -> None:
    source.state()
    forward_old_link()
    st.title("Runs")
    source.health_warning()
    live()


source.guarded(page)
