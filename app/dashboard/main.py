"""Streamlit entry: navigation only; each page lives in views/ at its own URL.

(Not pages/: Streamlit 1.67 still runs a folder named pages/ beside the entry as a v1
multipage app on a session's first request, so /alerts ran views/alerts.py without this
navigation.)"""

import streamlit as st

st.set_page_config(page_title="cliffwatch", layout="wide")
st.navigation([
    st.Page("views/runs.py", title="Runs", url_path="", default=True),
    st.Page("views/run.py", title="Run", url_path="run"),
    st.Page("views/compare.py", title="Compare", url_path="compare"),
    st.Page("views/incidents.py", title="Incidents", url_path="incidents"),
    st.Page("views/alerts.py", title="Alerts", url_path="alerts"),
    st.Page("views/sql.py", title="SQL", url_path="sql"),
]).run()
