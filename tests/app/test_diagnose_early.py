"""Every real incident, even early, repeated or sparse (issue 19, section 2): a checkpoint spike
repeated after one that rose over two lines is reported again; a warm-up divergence logged
every 200 steps is found within its first lines, not after 15 lines (3,000 steps) of history;
NaN at step 1 is an incident; a gradient norm's spikes are warnings, a burst of them one
incident. Each run, fed one line at a time or in random batches, gives what the whole run
gives."""

from __future__ import annotations

import json
import math
import random
import shutil

import numpy as np
import pandas as pd
import pytest

from app.diagnose.detect import CLOCK, SPIKE_HISTORY, RunDetector, Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose, severity, with_causes
from app.diagnose.load import run_lines
from samples import seed_cliff
from tests.app.test_diagnose import batches, diagnose_json
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SAMPLES, run_cli


def write_run(folder, lines: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def replica(folder) -> None:
    """The seed's facts (samples/seed_cliff.py) with other noise: another draw, and the loss
    already up (4.55) on the first line after the first stall, so that the first spike rises
    over two lines (4.55, then 13.0) and both its rises were the run's texture."""
    lines = seed_cliff.lines(random.Random(19))
    for line in lines:
        if line["step"] == 2027:
            line["loss"] = 4.55
    rich = seed_cliff.enrich([dict(x) for x in lines], random.Random(20))
    meta = json.loads((SAMPLES / "seed-cliff" / "run.json").read_text())
    seed_cliff.write(folder, rich, seed_cliff.events(rich), meta)


def warm_up_divergence(rng: random.Random) -> list[dict]:
    """Logged every 200 steps while lr climbs linearly to 1.0 at step 3000: the loss falls from
    4.66 at first, then climbs to 67.2 from step 1000 and stays there."""
    lines, loss = [], 4.66
    for line, step in enumerate(range(0, 6001, 200)):
        lr = min(1.0, step / 3000)
        if step and lr < 0.3:
            loss *= 0.97 * rng.uniform(0.99, 1.01)
        elif step:
            loss = min(67.2, loss * 1.6) * rng.uniform(0.97, 1.03)
        lines.append({"step": step, "loss": round(loss, 3), "lr": lr,
                      "grad_norm": round(0.3 * loss * rng.uniform(0.8, 1.2), 3),
                      "elapsed_s": 12.0 * line})
    return lines


BURST = [300, 304, 309, 313, 318]  # lines of one burst of gradient-norm spikes
LONE = 500  # ... and of one spike alone


def grad_norm_bursts(rng: np.random.Generator) -> list[dict]:
    """A calm loss; a gradient norm around 0.3 that jumps to 3-5 five times within 18 lines,
    and once more 180 lines later."""
    grad = 0.3 * rng.lognormal(0.0, 0.05, 600)
    for line in [*BURST, LONE]:
        grad[line] = rng.uniform(3.0, 5.0)
    loss = 2.0 * (1 - np.arange(600) / 3000) * rng.uniform(0.98, 1.02, 600)
    return [{"step": 10 * i, "loss": round(float(loss[i]), 4),
             "grad_norm": round(float(grad[i]), 4), "elapsed_s": 5.0 * i} for i in range(600)]


def test_a_repeated_checkpoint_spike_is_reported_each_time(tmp_path):
    replica(tmp_path / "seed")
    found = diagnose_json(tmp_path / "seed")
    assert sorted((i["kind"], i["step"]) for i in found) == [
        ("cliff", 4231), ("spike", 2027), ("spike", 4021), ("stall", 2027), ("stall", 4019)]
    second = next(i for i in found if (i["kind"], i["step"]) == ("spike", 4021))
    assert (second["value"], second["causes"][0]) == (7.24, "checkpoint")
    assert second["evidence"][0].startswith("checkpoint at step 4001 blocked the training loop")


def test_the_seed_keeps_its_five_incidents_and_their_causes(tmp_path):
    shutil.copytree(SAMPLES / "seed-cliff", tmp_path / "seed")
    found = {(i["kind"], i["step"]): i["causes"] for i in diagnose_json(tmp_path / "seed")}
    assert sorted(found) == [("cliff", 4231), ("spike", 2029), ("spike", 4021),
                             ("stall", 2027), ("stall", 4019)]
    assert found[("spike", 2029)][0] == found[("spike", 4021)][0] == "checkpoint"


def test_a_warm_up_divergence_logged_every_200_steps_is_found_early(tmp_path):
    write_run(tmp_path / "warmup", warm_up_divergence(random.Random(1)))
    found = diagnose_json(tmp_path / "warmup")
    assert [(i["kind"], i["metric"], i["severity"]) for i in found] == [
        ("divergence", "loss", "critical")]
    (divergence,) = found
    assert divergence["step"] == 1600  # the 9th line: 25.9, 6.2x the best (4.15 at step 800)
    assert divergence["end_step"] == 6000 and divergence["value"] > 60
    assert math.isclose(divergence["baseline"], 4.153, rel_tol=0.02)
    done = run_cli("diagnose", str(tmp_path / "warmup"))
    assert done.returncode == 0, done.stderr
    assert "DIVERGENCE in loss at step 1600 (through 6000): peak" in done.stdout


@pytest.mark.parametrize("shape", ["spike", "ramp", "memorised"])
def test_a_climb_that_does_not_stay_or_stays_low_is_no_divergence(tmp_path, shape):
    """One line far up (a spike's business), a planned climb (an lr watched as loss-like,
    from the first line), and a memorised run's tiny losses (0.0005-0.05 once it reached
    0.0005 from 3.6: 100x its best, never near where it started)."""
    rng = random.Random(3)
    if shape == "spike":
        values = [4.6, 4.4, 4.3, 40.0, 4.2, 4.1, 4.1, 4.0, 3.9]
    elif shape == "ramp":
        values = [3e-4 * min(1.0, i / 20) + 1e-6 for i in range(40)]
    else:
        values = [3.6 * 0.8 ** i for i in range(35)] + [rng.uniform(5e-4, 0.05)
                                                        for _ in range(300)]
    name = "lr" if shape == "ramp" else "loss"
    write_run(tmp_path / "logs" / shape, [{"step": 200 * i, name: v}
                                          for i, v in enumerate(values)])
    with ingest(tmp_path / "logs") as mon:
        found = diagnose(mon.db.cursor(), Watch(loss="loss,lr"))
    assert [i for i in found if i.kind == "divergence"] == []


def test_nan_at_step_1_is_an_incident(tmp_path):
    """... of a watched metric; a timing average of no steps yet (modded-nanogpt's
    step_avg:nanms until step 11) is no incident."""
    write_run(tmp_path / "nan", [{"step": 1, "loss": math.nan, "elapsed_s": 1.0},
                                 {"step": 2, "loss": math.nan, "elapsed_s": 2.0},
                                 {"step": 3, "loss": 9.2, "elapsed_s": 3.0}])
    write_run(tmp_path / "avg", [{"step": s, "loss": 10.9 - 0.1 * s, "step_avg":
                                  math.nan if s < 12 else 250.0 + s % 3} for s in range(1, 40)])
    found = diagnose_json(tmp_path / "nan")
    assert [(i["kind"], i["metric"], i["step"], i["end_step"]) for i in found] == [
        ("nonfinite", "loss", 1, 2)]
    assert diagnose_json(tmp_path / "avg") == []


def test_grad_norm_spikes_are_warnings_and_a_burst_is_one_incident(tmp_path):
    write_run(tmp_path / "grad", grad_norm_bursts(np.random.default_rng(2)))
    found = diagnose_json(tmp_path / "grad")
    lines = grad_norm_bursts(np.random.default_rng(2))
    assert [(i["kind"], i["metric"], i["step"], i["end_step"], i["severity"]) for i in found] \
        == [("spike", "grad_norm", 10 * BURST[0], 10 * BURST[-1], "warning"),
            ("spike", "grad_norm", 10 * LONE, 10 * LONE, "warning")]
    assert found[0]["value"] == max(lines[i]["grad_norm"] for i in BURST)  # the burst's peak
    done = run_cli("diagnose", str(tmp_path / "grad"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Warning: a gradient norm's spike") == 2


def test_a_grad_norm_spike_on_a_loss_spike_is_part_of_it():
    """Lines 300 and 500 spike in both (one loss incident each, columns in either order); the
    gradient norm alone at 400 is a warning."""
    rng = np.random.default_rng(5)
    n = 700
    loss = 2.0 + 0.01 * rng.standard_normal(n)
    grad = 0.3 * rng.lognormal(0.0, 0.05, n)
    loss[[300, 500]], grad[[300, 400, 500]] = 9.0, 4.0
    for columns in ({"grad_norm": grad, "loss": loss}, {"loss": loss, "grad_norm": grad}):
        frame = pd.DataFrame({"line_id": np.arange(n), "step": np.arange(n),
                              "attempt": np.ones(n, dtype=np.int64), CLOCK: np.arange(n) * 1.0,
                              **columns})
        found = RunDetector("r", Watch()).feed(frame)
        assert sorted((i.step, i.metric, i.severity) for i in found) == [
            (300, "loss", "critical"), (400, "grad_norm", "warning"), (500, "loss", "critical")]


def test_a_warning_sorts_after_a_loss_incident():
    loss = {"kind": "stall", "metric": "gap_s", "value": 20.0, "baseline": 10.0,
            "run": "r", "step": 5}
    grad = {"kind": "spike", "metric": "grad_norm", "value": 50.0, "baseline": 1.0,
            "run": "r", "step": 1}
    assert sorted([grad, loss], key=severity) == [loss, grad]


CASES = {
    "replica": replica,
    "warmup": lambda folder: write_run(folder, warm_up_divergence(random.Random(1))),
    "grad": lambda folder: write_run(folder, grad_norm_bursts(np.random.default_rng(2))),
}


@pytest.mark.parametrize("sizes", ["single", "random"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fed_in_any_batch_size_each_run_gives_the_whole_runs_incidents(tmp_path, case, sizes):
    CASES[case](tmp_path / "logs" / case)
    with ingest(tmp_path / "logs") as mon:
        cursor = mon.db.cursor()
        whole = diagnose(cursor, Watch())
        frame = run_lines(cursor, case, Watch())
        live, found = RunDetector(case, Watch()), {}
        for start, stop in batches(len(frame), sizes):
            for incident in live.feed(frame.iloc[start:stop].reset_index(drop=True)):
                found[incident.key] = incident
        fed = sorted(with_causes(cursor, case, list(found.values())), key=severity)
    fields = ("kind", "metric", "step", "end_step", "worst_step", "value", "baseline", "causes",
              "evidence")
    assert [[getattr(i, f) for f in fields] for i in whole] == [
        [getattr(i, f) for f in fields] for i in fed]
    assert len(whole) >= 1


def test_a_spike_leaves_the_yardstick_of_the_lines_after_it_for_the_whole_history():
    """Three spikes of the same height, each rising over two lines, far apart but within the
    history: each is reported (the second-largest rise of the lines before the third would be
    the first two's own)."""
    rng = np.random.default_rng(4)
    n = SPIKE_HISTORY // 2
    loss = 1.0 + 0.01 * rng.standard_normal(n)
    for line in (500, 1500, 2000):
        loss[line], loss[line + 1] = 4.0, 9.0
    frame = pd.DataFrame({"line_id": np.arange(n), "step": np.arange(n),
                          "attempt": np.ones(n, dtype=np.int64), CLOCK: np.arange(n) * 1.0,
                          "loss": loss})
    found = RunDetector("r", Watch()).feed(frame)
    assert [(i.kind, i.step, i.value) for i in found] == [
        ("spike", 500, 9.0), ("spike", 1500, 9.0), ("spike", 2000, 9.0)]


@pytest.mark.parametrize("split", [302, 306, 310])
def test_live_diagnosis_grows_a_stored_burst_and_stores_a_divergence(tmp_path, split):
    """The server's path: lines ingested in two parts, the burst's first spikes stored before
    the rest arrive; the incidents table ends with what the whole run gives."""
    grad = grad_norm_bursts(np.random.default_rng(2))
    warmup = warm_up_divergence(random.Random(1))
    write_run(tmp_path / "logs" / "grad", grad[:split])
    write_run(tmp_path / "logs" / "warmup", warmup[:split - 294])  # 8, 12, 16 lines
    with ingest(tmp_path / "logs") as mon:
        live = LiveDiagnosis(mon.db, Watch())
        live.update()
        for name, lines, first in (("grad", grad, split), ("warmup", warmup, split - 294)):
            with (tmp_path / "logs" / name / "metrics.jsonl").open("a") as handle:
                handle.write("".join(json.dumps(x) + "\n" for x in lines[first:]))
        mon.tailer.tick(discover=True)
        live.update()
        stored = query(mon, "SELECT run, kind, metric, step, end_step FROM incidents "
                            "ORDER BY run, step")
    assert stored == [("grad", "spike", "grad_norm", 10 * BURST[0], 10 * BURST[-1]),
                      ("grad", "spike", "grad_norm", 10 * LONE, 10 * LONE),
                      ("warmup", "divergence", "loss", 1600, 6000)]
