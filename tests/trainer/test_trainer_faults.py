"""Injected faults show up in the log exactly where they were injected."""

from __future__ import annotations

import math

import pytest
from trainer_testlib import events, metrics

from app.logformat import validate_run
from trainer.config import make_config
from trainer.errors import TrainerError
from trainer.faults import Fault, parse_faults
from trainer.train import lr_factor


def test_faults_hit_their_steps(run_tiny):
    run = run_tiny("faults", steps=14, fault="nan@5,stall@8:1.2,lr-spike@10:20")
    lines = {line["step"]: line for line in metrics(run)}
    assert math.isnan(lines[5]["loss"]) and not math.isfinite(lines[5]["grad_norm"])
    assert all(math.isfinite(lines[s]["loss"]) for s in lines if s != 5)  # update was skipped
    assert lines[8]["elapsed_s"] - lines[7]["elapsed_s"] >= 1.2
    config = make_config("tiny", out="x", steps=14)
    assert lines[10]["lr"] == pytest.approx(20 * config.optimizer.lr * lr_factor(config, 9))
    assert lines[11]["lr"] == pytest.approx(config.optimizer.lr * lr_factor(config, 10))
    kinds = [(e["kind"], e["step"]) for e in events(run, "fault")]
    assert kinds == [("nan", 5), ("stall", 8), ("lr-spike", 10)]
    assert validate_run(run) == []  # a NaN loss is valid v1: the monitor must see it


def test_fault_spec_parses():
    faults = parse_faults("nan@3, stall@7:2.5,lr-spike@7:10")
    assert faults == {
        3: [Fault("nan", 3, 0.0)],
        7: [Fault("stall", 7, 2.5), Fault("lr-spike", 7, 10.0)],
    }


@pytest.mark.parametrize("spec", ["nan", "nan@x", "nan@3:1", "stall@3", "spike@3:2", "lr-spike@3:"])
def test_bad_fault_specs_are_user_errors(spec):
    with pytest.raises(TrainerError, match="--fault"):
        parse_faults(spec)
