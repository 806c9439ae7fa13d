"""Stalls that are a run's rhythm are not stalls (issue 19 sections 3-4, a sweep of further real
logs: F1, F2). Fixtures in tests/data/rhythm/ (synthetic, of the shapes the sweep found):

- llamafactory-evals/trainer_log.jsonl: LLaMA-Factory, a line every 10 steps ~31 s apart, an
  eval_loss row every 500 steps whose pass adds ~220 s (~8x the usual gap). A person sees a
  routine evaluation rhythm. The first evaluation is reported (nothing yet says how long one
  takes), the later ones are judged against it. Guards: a 200 s training stall before step
  1730, and an evaluation at step 2500 that takes ~1,000 s (4x the others).
- two-speed/trainer_log.jsonl: a line every 5 steps, ~4 s or ~20 s apart (2 in 5 slow), a few
  37-38 s. The median is a fast gap, so on main every slow one was a stall. Guard: a 150 s
  stall before step 455.

A stall "every ~5 steps" at a log written every 5 steps is the log's pace, no period; a period
whose stalls held evaluations is "like periodic evaluations", not checkpoint saves.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from app.db import queries
from app.diagnose import causes
from app.diagnose.detect import SQL_PARAMS, Incident, Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose
from tests.app.test_ingest_bad_input import ingest, query

RHYTHM = Path(__file__).resolve().parents[1] / "data" / "rhythm"
EXPECTED = {  # run -> its stalls: (step, first cause)
    "llamafactory-evals": [(510, "evaluation"), (1730, "unknown"), (2510, "evaluation")],
    "two-speed": [(455, "unknown")],
}


def stalls(incidents) -> dict[str, list[tuple]]:
    found: dict[str, list[tuple]] = {}
    for i in sorted(incidents, key=lambda i: (i.run, i.step)):
        if i.kind == "stall":
            found.setdefault(i.run, []).append((i.step, i.causes[0]))
    return found


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rhythm")
    for run in EXPECTED:
        shutil.copytree(RHYTHM / run, root / run)
    return root


@pytest.fixture(scope="module")
def whole(logs):
    with ingest(logs) as mon:
        yield stalls(diagnose(mon.db.cursor(), Watch())), mon


@pytest.mark.parametrize("run", sorted(EXPECTED))
def test_a_runs_rhythm_is_no_stall_and_a_real_stall_still_is(whole, run):
    found, _ = whole
    assert found.get(run) == EXPECTED[run]


def test_a_slow_evaluation_is_judged_against_the_usual_one(whole):
    """The evaluation at step 2500 took ~1,000 s: 4x the ~250 s of the ones before, not ~30x
    the training gap."""
    _, mon = whole
    (stall,) = [i for i in diagnose(mon.db.cursor(), Watch())
                if i.kind == "stall" and i.step == 2510]
    assert 240 < stall.baseline < 260 and stall.value > 1000
    assert stall.evidence[0].startswith("an evaluation pass at step 2500")


@pytest.mark.parametrize("split", [0.3, 0.6])
def test_live_diagnosis_finds_the_stalls_the_whole_run_gives(tmp_path, split):
    """Lines ingested in two parts (the evaluation rows read with the lines around them)."""
    full = {}
    for run in EXPECTED:
        text = (RHYTHM / run / "trainer_log.jsonl").read_text().splitlines(True)
        full[run] = text
        (tmp_path / run).mkdir()
        (tmp_path / run / "trainer_log.jsonl").write_text("".join(text[:int(len(text) * split)]))
    with ingest(tmp_path) as mon:
        live = LiveDiagnosis(mon.db, Watch())
        live.update()
        for run, text in full.items():
            (tmp_path / run / "trainer_log.jsonl").write_text("".join(text))
        mon.tailer.tick(discover=True)
        live.update()
        stored = query(mon, "SELECT run, step, causes[1] FROM incidents WHERE kind = 'stall' "
                            "ORDER BY run, step")
    assert stored == [(run, step, cause) for run, found in sorted(EXPECTED.items())
                      for step, cause in found]


def test_the_named_query_reads_a_two_speed_run_as_the_detector_does(whole):
    """queries/stalls.sql's typical interval is the detector's (a quantile of the gaps before)."""
    _, mon = whole
    rows = queries.execute(mon.db.cursor(), "stalls", {"run": "two-speed"}).fetchall()
    assert [r[3] for r in rows] == [455]


def test_the_named_querys_documented_defaults_are_the_detectors():
    spec = queries.load("stalls")
    for param, value in SQL_PARAMS["stalls"].items():
        default = re.search(r"\(default: ([^)]*)\)", spec.params[param].help).group(1)
        assert float(default) == value, param
        assert f"coalesce(${param}, {default})" in spec.sql, param


def periodic(steps: list[int], interval: int, evals: list[dict] = ()) -> str | None:
    """causes._periodic for a stall at steps[-1] after the others, each `interval` steps after
    the line before it."""
    def stall(step):
        return Incident("r", "stall", "gap_s", step, step, 60.0, 5.0, line_id=step,
                        from_line_id=step - interval, detail={"steps": interval})
    ctx = causes.RunContext([], pd.DataFrame(), None, None, None, 0.0, evals=list(evals))
    window = pd.DataFrame({"step": [steps[-1] - interval, steps[-1]]})
    return causes._periodic(stall(steps[-1]), ctx, window, [stall(s) for s in steps[:-1]])


def test_stalls_every_logged_line_or_two_are_no_period():
    assert periodic([105, 110, 115], interval=5) is None
    assert periodic([100, 110, 120], interval=5) is None


def test_a_period_names_evaluations_where_they_ran_in_the_gap():
    saves = periodic([2000, 4000, 6000], interval=10)
    assert "every ~2,000 steps" in saves and "like periodic checkpoint saves" in saves
    evals = periodic([2000, 4000, 6000], interval=10, evals=[{"step": 5990, "eval_loss": 1.2}])
    assert "like periodic evaluations" in evals
