"""A fixed-seed short run: golden losses, learning, format v1, events and files."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

from trainer_testlib import events, metrics

from app.logformat import validate_run

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "trainer" / "golden_losses.json"
FIRST = 8  # logged losses compared with the golden file


def test_first_losses_match_golden_file(long_run):
    losses = [line["loss"] for line in metrics(long_run)[:FIRST]]
    if os.environ.get("CLIFFWATCH_UPDATE_GOLDEN"):
        overrides = {"steps": 120, "ckpt_every": 50, "keep": 2}  # as in conftest's long_run
        doc = {"preset": "tiny", "overrides": overrides, "losses": losses}
        GOLDEN.write_text(json.dumps(doc, indent=2) + "\n")
    golden = json.loads(GOLDEN.read_text())["losses"]
    # 1e-4 relative: bit-exact on one machine, yet robust to another CPU's float kernels
    assert all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(losses, golden, strict=True))


def test_loss_falls_and_accuracy_rises(long_run):
    lines = metrics(long_run)
    first, last = lines[:10], lines[-10:]
    loss_start = statistics.mean(line["loss"] for line in first)
    loss_end = statistics.mean(line["loss"] for line in last)
    acc_start = statistics.mean(line["accuracy"] for line in first)
    acc_end = statistics.mean(line["accuracy"] for line in last)
    assert loss_end < 0.8 * loss_start
    assert acc_end > acc_start + 0.1


def test_every_line_follows_log_format_v1(long_run):
    assert validate_run(long_run) == []


def test_metrics_lines_carry_the_seed_names(long_run):
    wanted = {
        "step", "loss", "accuracy", "avg_streak", "lr", "noise_std", "tgt_batch_per_sec",
        "dft_batch_per_sec", "tok_per_sec", "hs_queue_depth", "elapsed_s", "epoch", "buckets",
        "grad_norm", "time",
    }  # fmt: skip
    lines = metrics(long_run)
    assert all(wanted <= line.keys() for line in lines)
    assert [line["step"] for line in lines] == list(range(1, 121))
    assert all(len(line["buckets"]) == 2 for line in lines)  # grad_accum micro-batches each
    assert all(0 <= line["hs_queue_depth"] <= 4 for line in lines)


def test_events_mark_start_epochs_checkpoints_and_end(long_run):
    kinds = [e["event"] for e in events(long_run)]
    assert kinds[:2] == ["run_start", "target_ready"]  # init writes run_start
    assert kinds[-1] == "run_end" and events(long_run, "run_end")[0]["status"] == "completed"
    epochs = [e["epoch"] for e in events(long_run, "epoch_start")]
    assert epochs == list(range(len(epochs))) and len(epochs) >= 3
    lines = metrics(long_run)
    for event in events(long_run, "epoch_start")[1:]:  # the epoch field changes there
        line = next(x for x in lines if x["step"] == event["step"])
        assert line["epoch"] == event["epoch"]
    saved = [e["step"] for e in events(long_run, "checkpoint_end")]
    assert saved == [50, 100, 120]
    assert sorted(p.name for p in (long_run / "ckpt").iterdir()) == ["step-100.pt", "step-120.pt"]


def test_run_json_names_buckets_and_config(long_run):
    doc = json.loads((long_run / "run.json").read_text())
    assert doc["format"] == "cliffwatch/1"
    assert [b["max_len"] for b in doc["buckets"]] == doc["config"]["batch"]["bucket_bounds"]
    assert doc["config"]["batch"]["shuffle"] == "bucketed" and doc["world_size"] == 1
    assert doc["steps_per_epoch"] > 0
