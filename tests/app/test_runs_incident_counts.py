"""The Runs page's incidents column counts every incident of a run, and the open column how
many of them are open, both numbers (so they sort as numbers): it counted only the open ones
(read/runs_open_incidents), so a finished run whose incidents had all ended showed 0, as if
diagnosis had found nothing in it.

On a real database (the seed run, a finished run with one NaN episode that ended, and a run
whose last lines are NaN), read through the page's own read and through the Runs page in
Streamlit's AppTest.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from streamlit import cache_data

from app import state
from app.read.runs import runs_table
from tests.app.test_dashboard_pages import page, serve_in_process
from tests.conftest import SAMPLES

SEED = "seed-cliff"  # 5 incidents; its cliff reaches the newest line (4231..4499): open
ENDED = "nan-mid"  # finished, NaN at steps 100..102 and finite after: one incident, closed
OPEN = "nan-tail"  # NaN on its last 3 lines: one incident, open


def nan_run(folder, nan_steps: range, lines: int = 300, ended: bool = False) -> None:
    folder.mkdir(parents=True)
    rows = [{"step": s, "loss": "NaN" if s in nan_steps else 2.0 - s / 1000,
             "elapsed_s": float(s)} for s in range(1, lines + 1)]
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps(r).replace('"NaN"', "NaN") + "\n" for r in rows))
    if ended:
        (folder / "events.jsonl").write_text(json.dumps(
            {"event": "run_end", "step": lines, "status": "completed"}) + "\n")


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    logs = tmp_path_factory.mktemp("counts") / "logs"
    shutil.copytree(SAMPLES / SEED, logs / SEED)
    nan_run(logs / ENDED, range(100, 103), ended=True)
    nan_run(logs / OPEN, range(298, 301))
    monitor = serve_in_process(logs)
    yield monitor
    state.set_current(None)
    cache_data.clear()
    monitor.close()


def test_every_incident_is_counted_and_the_open_ones_apart(counted):
    table = runs_table(counted.db.cursor()).set_index("run")
    stored = dict(counted.db.cursor().execute(
        "SELECT run, count(*) FROM incidents GROUP BY run").fetchall())
    assert stored == {SEED: 5, ENDED: 1, OPEN: 1}
    assert table.loc[ENDED, "state"] == "finished"
    counts = {run: (table.loc[run, "incidents"], table.loc[run, "open_incidents"])
              for run in stored}
    assert counts == {SEED: (5, 1), ENDED: (1, 0), OPEN: (1, 1)}  # before: ENDED (0)


def test_the_runs_page_shows_all_and_how_many_are_open(counted):
    frame = page().dataframe[0].value.set_index("run")
    shown = {run: (frame.loc[run, "incidents"], frame.loc[run, "open_incidents"])
             for run in (SEED, ENDED, OPEN)}
    assert shown == {SEED: (5, 1), ENDED: (1, 0), OPEN: (1, 1)}
    # numbers, not text: sorted on the page, 12 incidents come after 5 ("12 (1 open)" did not)
    assert all(pd.api.types.is_integer_dtype(frame[c]) for c in ("incidents", "open_incidents"))
