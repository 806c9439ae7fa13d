"""No false alarm from the way a log was written (issue 19, sections 3 and 4): two processes
printing one log, a line logged twice, lines a few steps out of order at an epoch boundary,
and the restart signs (a step back, a clock back, an epoch reset), through the real ingest
(``ingest --once``) and ``diagnose``. The fixtures are in tests/data/writers/ (make.py there
says what each holds); each fails on the rule before this one, where every step that did not
rise above the line before started an attempt.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import duckdb
import httpx
import numpy as np
import pytest

from app.ingest import writers
from app.ingest.writers import Writers
from tests.conftest import run_cli, wait_for

WRITERS = Path(__file__).parent.parent / "data" / "writers"


@pytest.fixture(scope="module")
def read(tmp_path_factory) -> dict:
    logs = tmp_path_factory.mktemp("writers") / "logs"
    for case in ("two-writers", "duplicate", "out-of-order", "epoch-reset"):
        shutil.copytree(WRITERS / case, logs / case)
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0, done.stderr
    text = run_cli("diagnose", str(logs))
    found = run_cli("diagnose", str(logs), "--json")
    assert found.returncode == 0, found.stderr
    incidents = json.loads(found.stdout)
    incidents = incidents["incidents"] if isinstance(incidents, dict) else incidents
    db = duckdb.connect(str(logs / ".cliffwatch" / "cliffwatch.duckdb"), read_only=True)
    try:
        attempts = db.execute("SELECT run, start_step, prev_step, reason FROM attempts "
                              "ORDER BY run, attempt").fetchall()
        lines = dict(db.execute("SELECT run, count(*) FROM metrics GROUP BY run").fetchall())
    finally:
        db.close()
    return {"attempts": attempts, "incidents": incidents, "text": text.stdout, "lines": lines}


def resumes(read: dict, run: str) -> list[tuple]:
    return [a[1:] for a in read["attempts"] if a[0] == run and a[3] != "start"]


def test_two_writers_start_no_attempt_per_repeated_step_but_the_real_restart(read):
    assert resumes(read, "two-writers") == [(91, 300, "step_back+clock_back")]


def test_two_writers_are_said_once_and_their_clocks_make_no_stall(read):
    found = [(i["kind"], i["step"], i["severity"]) for i in read["incidents"]
             if i["run"] == "two-writers"]
    assert sorted(found) == [("stall", 200, "critical"), ("two_writers", 3, "info")]
    assert "two processes write this log" in read["text"]


@pytest.mark.parametrize("run", ["duplicate", "out-of-order"])
def test_a_line_logged_twice_or_out_of_order_is_no_resume(read, run):
    assert resumes(read, run) == []
    assert [i for i in read["incidents"] if i["run"] == run] == []


def test_an_epoch_reset_is_a_resume_though_the_step_rises(read):
    assert resumes(read, "epoch-reset") == [(510, 500, "epoch_reset"),
                                            (1010, 1000, "epoch_reset")]
    assert read["lines"]["epoch-reset"] == 150  # the step rose: every line stays in view


@pytest.mark.parametrize(("lines", "reasons"), [
    ([(20, 10.0), (40, 20.0), (20, 5.0), (40, 15.0)], [None, None, "step_back+clock_back",
                                                       None]),
    ([(10, 77.0), (11, 0.2), (12, 0.4)], [None, None, None]),  # a timer restarted: no resume
    ([(98, 1.0), (100, 2.0), (99, 3.0), (101, 4.0)], [None] * 4),  # out of order
    ([(80, 1.0), (100, 2.0), (90, 3.0), (110, 4.0)], [None] * 4),  # ... by a logged line
    # one step back with the clock begun again: our own trainer resumed from step 2's save
    ([(1, 1.0), (2, 2.0), (3, 3.0), (2, 0.5)], [None, None, None, "step_back+clock_back"]),
])
def test_the_resume_signs_line_by_line(lines, reasons):
    memory = Writers()
    assert [memory.line(step, clock)[0] for step, clock in lines] == reasons


def test_the_live_server_says_two_writers_once_and_the_one_real_stall(tmp_path, make_server):
    lines = (WRITERS / "two-writers" / "train_log.jsonl").read_text().splitlines(True)
    log = tmp_path / "logs" / "two-writers" / "train_log.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(lines[:301]))  # the rest arrives while the server watches
    server = make_server(tmp_path / "logs")

    def kinds() -> list[tuple]:
        found = httpx.get(server.url + "/api/incidents", timeout=30).json()["incidents"]
        return sorted((i["kind"], i["step"]) for i in found)

    wait_for(lambda: ("two_writers", 3) in kinds(), timeout=60)
    with log.open("a") as out:
        out.write("".join(lines[301:]))
    wait_for(lambda: server.sql("SELECT count(*) FROM metrics_all").json()["rows"]
             == [[len(lines)]], timeout=60)
    wait_for(lambda: ("stall", 200) in kinds(), timeout=60)  # judged from the second part
    assert kinds() == [("stall", 200), ("two_writers", 3)]


@pytest.mark.parametrize("at", [slice(20, 25), slice(0, 3), slice(35, 40)])
def test_infinite_clocks_are_placed_as_line_by_line_and_numpy_warns_of_nothing(at):
    """A clock that overflowed to inf on lines in a row (``"elapsed_s": 1e400``): the lines
    read at once get the intervals ``Writers.line`` gives one by one (no interval between two
    infinite clocks), and numpy says nothing (it warned "invalid value encountered in
    subtract" from each inf - inf)."""
    steps, clocks = np.arange(1, 41), np.arange(1.0, 41.0)
    clocks[at] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dt, _ = writers.intervals(Writers(), steps, clocks)
        found = writers.resumes(Writers(), steps, clocks, np.full(len(steps), np.nan))
    one = Writers()
    each = [one.line(int(s), float(c)) for s, c in zip(steps, clocks, strict=True)]
    assert np.array_equal(dt, [d for _, d in each], equal_nan=True)
    assert found == [(i, r) for i, (r, _) in enumerate(each) if r]
