"""Alerts page (``/alerts``): the rules in force, each (rule, run)'s state, silences, and the
recent notifications with every delivery attempt; a test message and a silence form.

What firing looks like on the page::

    loss-high on live is firing since step 212: loss 5.31 > 5
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

from ..alerts.duration import parse_duration
from ..alerts.webhook import parse_facts
from ..errors import CliffwatchError
from . import backend, banner, wording

ACTIVE = ("firing", "pending")
# the States grid's columns, the ones a reader scans first, so they fit the page's width
# (the API's /api/alerts has every column); a long run name is cut in its own cell
STATE_COLUMNS = ["rule", "run", "metric", "state", "changed_step", "changed_time", "value",
                 "notified_time"]


def attempts(outbox: list[dict]) -> str:
    """One line per target: its status and each attempt's outcome."""
    parts = []
    for row in outbox:
        tries = ", ".join(f"#{d.get('attempt')} {d.get('outcome')}"
                          + (f" {d['http_status']}" if d.get("http_status") else "")
                          + (f" ({d['error']})" if d.get("error") else "")
                          for d in row.get("deliveries") or [])
        parts.append(f"{row.get('target')}: {row.get('status')}" + (f" [{tries}]" if tries else ""))
    return "; ".join(parts) or "not sent to any target"


def when(seconds) -> str:
    if seconds is None or pd.isna(seconds):  # a column with a None arrives as NaN
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):
        # a silence stored before durations were bounded (a year) can end past any date
        return f"{seconds:.0f} (Unix seconds, past any date)"


def readable_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Unix-second columns (``*_time``) as local date and time, as the rest of the page."""
    for column in [c for c in frame.columns if c.endswith("_time")]:
        frame[column] = frame[column].map(when)
    return frame


def summary_of(detail) -> str | None:
    """The sentence an alert state's detail (its facts, as JSON) carries."""
    facts = parse_facts(detail)
    return (facts.get("facts") or {}).get("summary") or (
        facts.get("pending_facts") or {}).get("summary") or facts.get("summary")


def active_states(states: list[dict]) -> None:
    """Firing and pending alerts as text (a table is a canvas: a reader searches text)."""
    active = [s for s in states if s.get("state") in ACTIVE]
    if not active:
        st.success("No alert is firing or pending.")
        return
    for s in sorted(active, key=lambda s: s.get("state") != "firing"):
        since = f" since step {s['changed_step']}" if s.get("changed_step") is not None else ""
        summary = summary_of(s.get("detail"))
        detail = f": {wording.md(summary)}" if summary else ""
        line = (f"**{wording.md(s.get('rule'))}** on **{wording.md(s.get('run'))}** is "
                f"{wording.md(s.get('state'))}{since}{detail}")
        (st.error if s.get("state") == "firing" else st.warning)(line)


@st.fragment(run_every=backend.REFRESH_S)
def live() -> None:
    from ..read import alerts as alerts_mod

    view = alerts_mod.overview(backend.state())
    active_states(view.get("states") or [])
    st.subheader("States")
    states = pd.DataFrame(view.get("states") or [])
    if states.empty:
        st.caption("None.")  # as the other sections say, not an empty grid
    else:
        st.dataframe(readable_times(states), hide_index=True, width="stretch",
                     column_order=STATE_COLUMNS, column_config={
                         "run": st.column_config.TextColumn("run", width="medium")})
    st.subheader("Silences in force")
    silences = pd.DataFrame(view.get("silences") or [])
    if silences.empty:
        st.caption("None.")
    else:
        st.dataframe(readable_times(silences), hide_index=True, width="stretch")
    st.subheader("Recent notifications")
    notes = view.get("notifications") or []
    if not notes:
        st.caption("None sent yet.")
    else:
        notifications(notes)


def notifications(notes: list[dict]) -> None:
    """The recent notifications; the selected one's text (the newest until one is) in full
    under the grid, whose cell cuts a message off."""
    picked = st.dataframe(pd.DataFrame([{
        "id": n.get("id"), "time": when(n.get("created_time")), "kind": n.get("kind"),
        "text": n.get("text"), "silenced": n.get("silenced"),
        "deliveries": attempts(n.get("outbox") or [])} for n in notes]),
        hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
        key="a-notes", column_config={  # a fixed width: the deliveries column stays in view
            "text": st.column_config.TextColumn("text", width="large")})
    rows = picked.selection.rows if picked is not None else []
    note = notes[rows[0] if rows and rows[0] < len(notes) else 0]
    st.caption(f"Notification {note.get('id')} in full (select another to read it):")
    st.markdown(wording.md(note.get("text") or ""))


def rules_section(view: dict) -> list[str]:
    st.subheader("Rules")
    st.caption(f"From {wording.md(view.get('rules_source'))}. Notifications go to: "
               + (wording.md(", ".join(t["label"] for t in view.get("targets") or []))
                  or "the server log")
               + ".")
    rules = view.get("rules") or []
    if not rules:
        st.caption("None.")
        return []
    # a static table, whose cells wrap: each rule's "when" is read in full, never cut off
    # at the grid's column edge (issue 20, item 7)
    # st.table reads its cells as Markdown: a rule's runs "*" would be a bullet
    shown = pd.DataFrame(rules)[["name", "type", "severity", "runs", "when"]].map(wording.md)
    st.table(shown.set_index("name"))
    return [r["name"] for r in rules]


def test_message() -> None:
    from ..alerts import actions as alerts_mod

    if st.button("Send test message", help="one test message to every webhook target"):
        nid = alerts_mod.send_test(backend.state())
        st.success(f"Test message {nid} queued; its delivery attempts show under Recent "
                   "notifications.")


def silence_form(rules: list[str]) -> None:
    from ..alerts import actions as alerts_mod

    with st.form("silence", clear_on_submit=False):
        st.markdown("**Silence a rule for a run**")
        cols = st.columns([2, 2, 1, 3])
        rule = cols[0].selectbox("rule", rules)
        run = cols[1].text_input("run", "*", help="a run name, or a glob such as sweep3-*; "
                                 "* silences it for every run")
        duration = cols[2].text_input("for", "2h", help="e.g. 30m, 2h, 1d")
        comment = cols[3].text_input("comment", "")
        if not st.form_submit_button("Silence"):
            return
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise CliffwatchError(f"for: {exc}") from None
    if seconds <= 0:
        raise CliffwatchError('for must be longer than 0, e.g. "2h"')
    sid = alerts_mod.silence(backend.state(), rule, run, seconds, comment or None)
    st.success(f"Silence {sid}: {wording.md(rule)} on {wording.md(run)} for "
               f"{wording.md(duration)}.")


def page() -> None:
    from ..read import alerts as alerts_mod

    backend.state()
    st.title("Alerts")
    banner.health_warning()
    live()
    rules = rules_section(alerts_mod.overview(backend.state()))
    test_message()
    if rules:
        silence_form(rules)


backend.guarded(page)
