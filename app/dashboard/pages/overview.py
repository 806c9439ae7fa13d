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
    st.dataframe(data.runs(), hide_index=True)
    frame = data.metrics(run)
    if frame.empty:
        st.info(f"Run {run} has no metric lines yet.")
        return
    numeric = data.metric_columns(frame)
    default = [m for m in ("loss", "accuracy") if m in numeric] or numeric[:1]
    chosen = st.multiselect("Metrics", numeric, default=default, key=f"metrics-{run}")
    last = frame.iloc[-1]
    st.caption(f"{len(frame)} lines, last step {int(last['step'])}")
    found = data.incidents(run)
    if not found.empty:
        st.subheader(f"Incidents ({len(found)})")
        st.dataframe(found, hide_index=True)
    markers = data.markers(run)
    for metric in chosen:
        st.altair_chart(charts.metric_line(frame, metric, markers), width="stretch")


live(run)
