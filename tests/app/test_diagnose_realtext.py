"""The detector's rules on real text logs of ../shared/realdata (issue 19, section 2), read
here with a few lines of regex each, since ingest's text reader is another part's (section 1):
its steps and losses in the order logged are all the detector needs.

- torchtitan-crash-resume: right after each in-run checkpoint save (steps 5500, 6000, 6500)
  the loss jumps 2.5x and the grad norm 4x: the three loss spikes are each reported (the
  third, 6501, hid behind the first two's rises before), the grad norm's as warnings;
- modded-nanogpt (Muon, SOAP): per-step noise and 1.4x single-step jumps from the data order,
  and `step_avg:nanms` until step 11 (an average of no steps yet): no incident;
- the ChatGLM2 run memorised its data (loss 3.57 -> 0.0023, 1.5-1.8x blips at ~0.03): none.
"""

from __future__ import annotations

import ast
import math
import re

import numpy as np
import pandas as pd
import pytest

from app.diagnose.detect import CLOCK, NONFINITE, RunDetector, Watch
from tests.conftest import SHARED

REALDATA = SHARED / "realdata"
pytestmark = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is missing")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TITAN = re.compile(r"step:\s*(\d+)\s+loss:\s*(\S+)\s+grad_norm:\s*(\S+)")
MODDED = re.compile(r"^step:(\d+)/\d+ train_loss:(\S+) .*step_avg:(\S+)ms")
HF_DICT = re.compile(r"\{'loss'[^}]*\}")


def rows(name: str) -> list[dict]:
    (path,) = [p for p in (REALDATA / name).iterdir() if p.name != "README.md"]
    text = ANSI.sub("", path.read_text(errors="replace")).replace("\r", "\n")
    found = []
    for line in text.splitlines():
        if name.startswith("torchtitan") and (m := TITAN.search(line)):
            found.append({"step": int(m[1]), "loss": float(m[2]), "grad_norm": float(m[3])})
        elif name.startswith("modded") and (m := MODDED.match(line)):
            found.append({"step": int(m[1]), "loss": float(m[2]), "step_avg": float(m[3])})
        elif name.startswith("hf-") and (m := HF_DICT.search(line)):
            entry = {k: float(v) for k, v in ast.literal_eval(m[0]).items() if k != "epoch"}
            found.append({"step": 10 * (len(found) + 1), **entry})
    return found


def incidents(name: str) -> list[tuple]:
    frame = pd.DataFrame(rows(name))
    n = len(frame)
    for metric in [c for c in frame.columns if c != "step"]:  # as app/diagnose/load.py flags
        if not np.isfinite(frame[metric]).all():  # a logged NaN (every value here is logged)
            frame[NONFINITE + metric] = ~np.isfinite(frame[metric])
    frame.insert(0, "line_id", np.arange(n))
    frame["attempt"], frame[CLOCK] = np.ones(n, dtype=np.int64), np.full(n, np.nan)
    return [(i.kind, i.metric, i.step, i.severity)
            for i in RunDetector(name, Watch()).feed(frame)]


def test_each_checkpoint_spike_of_the_crashing_torchtitan_run_is_reported():
    """The grad norm jumps on the same lines: part of each loss incident, not one more."""
    assert incidents("torchtitan-crash-resume") == [
        ("spike", "loss", step, "critical") for step in (5501, 6001, 6501)]


@pytest.mark.parametrize("name", ["modded-nanogpt-muon", "modded-nanogpt-soap",
                                  "hf-chatglm2-lora-nohup"])
def test_noisy_and_memorised_losses_stay_quiet(name):
    lines = rows(name)
    assert len(lines) > 1000
    if name.startswith("modded"):
        unset = [x["step"] for x in lines if math.isnan(x["step_avg"])]  # its first steps
        assert len(unset) >= 10 and unset == list(range(1, len(unset) + 1))
    assert incidents(name) == []
