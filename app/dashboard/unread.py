"""The notice the Runs and Incidents pages give of files that were not read, so that a run
whose log was never read never looks clean (issue 19, section 1)::

    ⚠ 1 file not read, so its run is not judged on it:
      prose/notes.txt: not a log yet: no line with a step-like key (step, iter, ...)
    Also not read, with nothing missed: hf/trainer_log.jsonl (trainer_state.json holds ...)

The files and reasons are diagnose's own (app/diagnose/coverage.unread), so the pages and
``diagnose`` name the same files for the same reasons.
"""

from __future__ import annotations

import streamlit as st

from . import backend, wording

SHOWN = 10  # files named on the page; GET /api/health and `diagnose` list every one


@st.cache_data(ttl=2.0, show_spinner=False)
def files(runs: tuple[str, ...] | None) -> list[tuple[str, str, str, bool]]:
    """(run, file, reason, missed) of each file of ``runs`` (None: every run) not read."""
    from ..diagnose import coverage

    return [(u.run, u.file, u.reason + (f"; {u.unseen}" if u.unseen else ""), u.missed)
            for u in coverage.unread(backend.cursor(), list(runs) if runs else None)]


def notice(runs: tuple[str, ...] | None = None) -> int:
    """A warning naming each file not read (and why) that leaves something of a run unseen,
    a caption for those another log of the run repeats; how many files were missed."""
    found = files(runs)
    missed = [f for f in found if f[3]]
    if missed:
        lines = [f"- **{wording.md(file)}**: {wording.md(reason)}"
                 for _, file, reason, _ in missed[:SHOWN]]
        more = (f"\n\n... and {len(missed) - SHOWN} more (`GET /api/health` lists them)"
                if len(missed) > SHOWN else "")
        st.warning(f"{len(missed)} file(s) not read, so what they hold is not judged: "
                   "no incident found there means nothing.\n\n" + "\n".join(lines) + more)
    repeated = [f for f in found if not f[3]][:SHOWN]
    if repeated:
        st.caption("Also not read, with nothing missed: " + "; ".join(
            f"{wording.md(file)} ({wording.md(reason.removeprefix('not read: '))})"
            for _, file, reason, _ in repeated) + ".")
    return len(missed)
