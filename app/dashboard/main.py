"""Streamlit entry: navigation only; each page lives in pages/."""

import streamlit as st

st.set_page_config(page_title="cliffwatch", layout="wide")
pages = [st.Page("pages/overview.py", title="Runs", default=True)]
st.navigation(pages).run()
