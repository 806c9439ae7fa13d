"""Runs page: pick a run and watch its loss (and any other metric) grow live."""

import streamlit as st

from app.dashboard import charts, data
from app.errors import CliffwatchError

REFRESH_S = 2

st.title("cliffwatch")

try:
    runs = data.runs()
except CliffwatchError as exc:
    st.info(str(exc))
    st.stop()

if runs.empty:
    st.info(f"Waiting for the first log line in {data.logdir()} ...")
    st.stop()

run = st.selectbox("Run", runs["run"].tolist())


@st.fragment(run_every=REFRESH_S)
def live(run: str) -> None:
    summary = data.runs()
    st.dataframe(summary, hide_index=True)
    counts = data.columns(run)
    lines = counts.get("step", 0)
    if not lines:
        st.info(f"Run {run} has no metric lines yet.")
        return
    numeric = data.metric_names(counts)
    default = [m for m in ("loss", "accuracy") if m in numeric] or numeric[:1]
    chosen = st.multiselect("Metrics", numeric, default=default, key=f"metrics-{run}")
    last_step = summary.loc[summary["run"] == run, "last_step"].iloc[0]
    shown = "every line" if lines <= data.FULL_LINES else "about 2,000 points, spikes kept"
    st.caption(f"{lines} lines, last step {int(last_step)} ({shown})")
    found = data.incidents(run)
    if not found.empty:
        st.subheader(f"Incidents ({len(found)})")
        st.dataframe(found, hide_index=True)
    markers = data.markers(run)
    full = data.metrics(run) if lines <= data.FULL_LINES else None
    for metric in chosen:
        frame = data.series(run, metric, lines, full)
        st.altair_chart(charts.metric_line(frame, metric, markers), width="stretch")


live(run)
