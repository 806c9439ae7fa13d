"""A run picker that never lists every run: a search box, and the first ``reads.PICKS`` runs
whose names match it (live first, then the most recently written) as the options. With
10,000 runs a selectbox of every name cost the page a read of every run and the browser
10,000 options; this one reads one page of names from the runs table::

    search runs [sweep3      ]     run [sweep3-lr0.1  v]
    50 of 312 runs matching 'sweep3'; type more of the name to narrow them.
"""

from __future__ import annotations

import streamlit as st

from . import reads, wording


def search_box(key: str, label: str = "search runs", **on_change) -> str | None:
    """A search box (part of a run name, or a glob such as ``sweep3-*``); its text or None.
    ``on_change``/``args``: as Streamlit's, to write the text to the URL."""
    text = st.text_input(label, key=key, type="search", live=True,
                         placeholder="part of a run name, or a glob such as sweep3-*",
                         help="matches any part of the name, in any case; * ? [ ] make it "
                              "a glob", **on_change)
    return (text or "").strip() or None


def matches(q: str | None, keep: list[str] | tuple = ()) -> list[str]:
    """The runs a picker offers for ``q``: ``keep`` (what is chosen already) first, then the
    first matches; a caption says when there are more than it shows."""
    names, total = reads.find_runs(q)
    if total > len(names):
        where = f" matching {wording.md(repr(q))}" if q else ""
        st.caption(f"{len(names)} of {total} runs{where}; type more of the name to narrow "
                   "them.")
    elif q and not total:
        st.caption(f"No run matches {wording.md(repr(q))}.")
    return [*keep, *(n for n in names if n not in keep)]


LAST_RUN = "cw-last-run"  # session state: the run this browser session last looked at


def remember(run: str | None) -> None:
    """Note the run a page shows, for pages that pre-fill a run (the SQL page's ``$run``)."""
    if run:
        st.session_state[LAST_RUN] = run


def last_run() -> str | None:
    """The run this session last looked at (Run, Compare, Incidents pages), while it exists,
    else the newest run (the first the Runs page lists), else None."""
    run = st.session_state.get(LAST_RUN)
    if run and reads.run_exists(run):
        return run
    names, _ = reads.find_runs(None, 1)
    return names[0] if names else None
