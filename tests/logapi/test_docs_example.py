"""docs/logging-api.md's plain-PyTorch loop, run as written on a tiny model: its log is valid
v1, and the save it wraps is the checkpoint the events name."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from app.logformat import validate_run
from tests.conftest import ROOT

pytest.importorskip("torch", reason="the example trains a torch model (the trainer extra)")

SETUP = """
import torch
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(2000)]
"""


def example() -> str:
    text = (ROOT / "docs" / "logging-api.md").read_text()
    section = text.split("## Plain PyTorch", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_plain_pytorch_loop_writes_a_valid_run(tmp_path):
    code = example()
    assert len(code.strip().splitlines()) <= 12  # "in ten lines", give or take the import
    (tmp_path / "train.py").write_text(SETUP + code)
    # one torch thread: a 4x3 layer gains nothing from two, and two beside the suite's other
    # worker wait on each other at every op (this run took over 120 s under load)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "drafter-lr3e-4"
    assert validate_run(run) == []
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    saves = [e for e in events if e["event"] == "checkpoint_end"]
    assert [e["step"] for e in saves] == [1000, 2000]
    assert all(e["bytes"] > 0 and e["path"].endswith(f"step-{e['step']}.pt") for e in saves)
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "completed"
