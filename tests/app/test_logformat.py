"""Log format v1: the golden examples validate, bad lines are named, and the monitor reads the
golden run into the tables docs/log-format.md promises."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from app.logformat import check_event, check_metrics_line, check_run_json, validate_run
from tests.app.test_ingest_bad_input import ingest, query

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "logformat"


@pytest.mark.parametrize("run", ["full", "plain"])
def test_golden_runs_validate(run):
    assert validate_run(GOLDEN / run) == []


@pytest.mark.parametrize(("line", "problem"), [
    ({"loss": 1.0}, "missing 'step'"),
    ({"step": "3"}, "'step' must be an integer"),
    ({"step": 7.0}, "'step' must be an integer"),  # ingest refuses it too (test_keys.py)
    ({"step": 2**63}, "'step' must be an integer within 64 bits"),  # BIGINT holds no more
    ({"step": 3, "loss": "low"}, "metric 'loss' must be a number"),
    ({"step": 3, "buckets": [1, "a"]}, "'buckets' must be a list of integers"),
    ({"step": 3, "elapsed_s": float("nan")}, "'elapsed_s' must be a finite number"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_metrics_lines_are_named(line, problem):
    assert any(problem in p for p in check_metrics_line(line))


def test_events_and_run_json_rules():
    assert check_event({"event": "run_end", "step": 3, "status": "done"}) == [
        "run_end 'status' must be one of ['completed', 'failed', 'interrupted']"]
    assert check_event({"event": "checkpoint_end", "step": 3}) == [
        "checkpoint_end event lacks 'duration_s'", "checkpoint_end event lacks 'blocked_s'",
        "checkpoint_end event lacks 'bytes'"]
    assert check_event({"event": "my_kind", "step": 1}) == []  # unknown kinds are fine
    assert check_run_json({"format": "cliffwatch/2"})[0].startswith("run.json 'format'")


def test_monitor_reads_the_golden_run(tmp_path):
    shutil.copytree(GOLDEN / "full", tmp_path / "logs" / "full")
    with ingest(tmp_path / "logs") as mon:
        assert query(mon, "SELECT status, steps_per_epoch, world_size FROM runs") == [
            ("completed", 4, 2)]
        rows = query(mon, "SELECT step, attempt, loss, grad_norm, epoch, buckets FROM metrics "
                     "ORDER BY step")
        assert [r[:2] for r in rows] == [(1, 1), (2, 2), (5, 2)]  # resumed at step 2
        assert rows[1][2:] == (5.8, None, 0.0, [1, 1, 1, 1])
        nan_row = query(mon, "SELECT loss, grad_norm FROM metrics_all WHERE step = 3")[0]
        assert math.isnan(nan_row[0]) and nan_row[1] == math.inf
        kinds = [r[0] for r in query(mon, "SELECT kind FROM events ORDER BY \"offset\"")]
        assert kinds.count("checkpoint_end") == 1 and kinds[-1] == "run_end"
        assert query(mon, "SELECT rank, step, step_time_s FROM ranks_all ORDER BY rank, step")[
            -1] == (1, 2, 0.41)
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]
