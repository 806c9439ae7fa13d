"""Diagnosis on the seed incident rebuilt from its facts (samples/seed_cliff.py): exactly the
two stalls, the two spikes they caused and the accuracy cliff, with the right causes; nothing
on harmless noise; resumes of a real log blamed on nothing but `resume`; and the live
(line-by-line) detector agrees with the whole-run one."""

from __future__ import annotations

import json
import math
import random
import shutil

import pandas as pd
import pytest

from app.diagnose.detect import RunDetector, Watch
from app.diagnose.diagnosis import diagnose, severity, with_causes
from app.diagnose.load import run_lines
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SAMPLES, SHARED, needs_realdata, run_cli

REALDATA = SHARED / "realdata" / "slm-training-restarts"


def diagnose_json(path) -> list[dict]:
    done = run_cli("diagnose", str(path), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_plain_seed_log_stalls_spikes_and_cliff(tmp_path):
    shutil.copytree(SAMPLES / "seed-cliff-plain", tmp_path / "seed")
    found = diagnose_json(tmp_path / "seed")
    assert all(set(i) == {"run", "kind", "metric", "step", "end_step", "worst_step", "value",
                          "baseline", "causes", "evidence", "severity"} for i in found)
    assert {i["severity"] for i in found} == {"critical"}  # no gradient norm's spike here
    summary = sorted((i["kind"], i["metric"], i["step"]) for i in found)
    assert summary == [("cliff", "accuracy", 4231), ("spike", "loss", 2029),
                       ("spike", "loss", 4021), ("stall", "gap_s", 2027),
                       ("stall", "gap_s", 4019)]
    by_step = {i["step"]: i for i in found}
    assert by_step[2029]["causes"] == ["stall"] and by_step[4021]["causes"] == ["stall"]
    assert "167.2 s" in by_step[2029]["evidence"][0] and "27 steps since the line before" in (
        by_step[2029]["evidence"][0])
    assert not {"stall", "checkpoint"} & set(by_step[4231]["causes"])
    assert by_step[4231]["end_step"] == 4499 and by_step[4231]["value"] < 0.01  # its bottom
    assert (by_step[2029]["value"], by_step[2029]["worst_step"]) == (13.0, 2029)
    assert math.isclose(by_step[2027]["value"], 167.2) and by_step[2027]["baseline"] == 10.0
    assert found[0]["kind"] == "cliff"  # the report starts with the most severe


def test_events_epochs_and_buckets_name_the_causes(tmp_path):
    shutil.copytree(SAMPLES / "seed-cliff", tmp_path / "seed")
    found = {i["step"]: i for i in diagnose_json(tmp_path / "seed")}
    assert sorted(found) == [2027, 2029, 4019, 4021, 4231]
    for spike in (2029, 4021):
        assert found[spike]["causes"][0] == "checkpoint"
    assert found[2029]["evidence"][0].startswith("checkpoint at step 2000 blocked the training "
                                                 "loop for 155.2 s")
    cliff = found[4231]
    assert {"epoch_boundary", "bucket_homogeneity"} <= set(cliff["causes"])
    assert not {"stall", "checkpoint"} & set(cliff["causes"])
    assert "epoch 2 began at step 4228" in " ".join(cliff["evidence"])


def test_human_report_reads_like_an_incident_report(tmp_path):
    shutil.copytree(SAMPLES / "seed-cliff", tmp_path / "seed")
    done = run_cli("diagnose", str(tmp_path / "seed"))
    assert done.returncode == 0, done.stderr
    first = done.stdout.split("\n\n")[1]
    assert first.startswith("1. seed: CLIFF in accuracy at step 4231")
    assert "bucket_homogeneity" in first and "epoch_boundary" in first


@needs_realdata
def test_real_restarts_are_attempts_and_only_blamed_on_resume(tmp_path):
    shutil.copytree(REALDATA, tmp_path / "logs" / "slm")
    with ingest(tmp_path / "logs") as mon:
        attempts = query(mon, "SELECT start_step, prev_step, reason FROM attempts ORDER BY "
                         "attempt")
        assert [a[2] for a in attempts] == ["start"] + ["step_back"] * 3  # 20 twice: none
        assert (7520, 7580, "step_back") in attempts and (7520, 7560, "step_back") in attempts
        for incident in diagnose(mon.db.cursor(), Watch()):
            assert incident.causes == ["resume"], incident


def noisy_run(rng: random.Random, n: int = 400) -> list[dict]:
    lines, t = [], 0.0
    for i in range(1, n + 1):
        t += 14.0 if i == 200 else 10.0 * rng.uniform(0.97, 1.03)  # one interval 40% slower
        lines.append({"step": i, "loss": 2.0 * (1 - i / 2000) * rng.uniform(0.94, 1.06),
                      "accuracy": 0.5 * rng.uniform(0.97, 1.03) * (0.88 if i == 300 else 1),
                      "lr": 3e-4 * min(1.0, i / 100), "elapsed_s": t})
    return lines


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_harmless_noise_wobbles_and_warmup_are_not_incidents(tmp_path, seed):
    (tmp_path / "logs" / "calm").mkdir(parents=True)
    lines = noisy_run(random.Random(seed))
    (tmp_path / "logs" / "calm" / "metrics.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines))
    with ingest(tmp_path / "logs") as mon:
        # lr watched as loss-like too: its warm-up ramp is not a spike
        assert diagnose(mon.db.cursor(), Watch(loss="loss,lr")) == []


def test_nan_loss_is_an_incident(tmp_path):
    lines = noisy_run(random.Random(4), 100)
    lines[60]["loss"] = float("nan")
    lines[61]["loss"] = float("inf")
    (tmp_path / "logs" / "nan").mkdir(parents=True)
    (tmp_path / "logs" / "nan" / "metrics.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines))
    with ingest(tmp_path / "logs") as mon:
        found = diagnose(mon.db.cursor(), Watch())
        assert [(i.kind, i.metric, i.step, i.end_step) for i in found] == [
            ("nonfinite", "loss", 61, 62)]
        assert math.isnan(found[0].value) and found[0].causes == ["unknown"]


def batches(n: int, sizes: str) -> list[tuple[int, int]]:
    """[start, stop) ranges: one line at a time, or random sizes from 1 to 60."""
    rng, out, start = random.Random(7), [], 0
    while start < n:
        stop = start + 1 if sizes == "single" else min(n, start + rng.randint(1, 60))
        out.append((start, stop))
        start = stop
    return out


@pytest.mark.parametrize("sizes", ["single", "random"])
def test_line_by_line_detection_equals_whole_run(tmp_path, sizes):
    shutil.copytree(SAMPLES / "seed-cliff", tmp_path / "logs" / "seed")
    with ingest(tmp_path / "logs") as mon:
        cursor = mon.db.cursor()
        whole = diagnose(cursor, Watch())
        frame = run_lines(cursor, "seed", Watch())
        live = RunDetector("seed", Watch())
        found = {}
        for start, stop in batches(len(frame), sizes):  # as the lines arrive
            for incident in live.feed(frame.iloc[start:stop].reset_index(drop=True)):
                found[incident.key] = incident
        line_by_line = sorted(with_causes(cursor, "seed", list(found.values())), key=severity)
    fields = ["kind", "metric", "step", "end_step", "value", "baseline", "causes", "evidence"]
    as_rows = [{f: getattr(i, f) for f in fields} for i in whole]
    assert pd.DataFrame(as_rows).equals(pd.DataFrame(
        [{f: getattr(i, f) for f in fields} for i in line_by_line]))
    assert len(as_rows) == 5
