"""The detector's rules on real text logs of ../shared/realdata (issue 19, section 2), as
ingest's text reader (formats/textlog.py) stores them through the real tailer: the training
line's steps and losses in the order logged are all the detector needs.

- torchtitan-crash-resume: right after each in-run checkpoint save (steps 5500, 6000, 6500)
  the loss jumps 2.5x and the grad norm 4x: the three loss spikes are each reported (the
  third, 6501, hid behind the first two's rises before), the grad norm's jumps on the same
  lines as part of them;
- modded-nanogpt (Muon, SOAP): per-step noise and 1.4x single-step jumps from the data order,
  and `step_avg:nanms` until step 11 (an average of no steps yet): no incident;
- the ChatGLM2 run memorised its data (loss 3.57 -> 0.0023, 1.5-1.8x blips at ~0.03): none.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest

from app.diagnose.detect import CLOCK, NONFINITE, RunDetector, Watch
from tests.app.test_ingest_bad_input import ingest
from tests.conftest import SHARED

REALDATA = SHARED / "realdata"
pytestmark = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is missing")
# each run's training line as stored, with its loss as the log names it
COLUMNS = {"torchtitan-crash-resume": "loss, grad_norm",
           "modded-nanogpt-muon": "train_loss AS loss, step_avg",
           "modded-nanogpt-soap": "train_loss AS loss, step_avg",
           "hf-chatglm2-lora-nohup": "loss, learning_rate"}
STORED: dict[str, list[dict]] = {}


@pytest.fixture(scope="module", autouse=True)
def stored(tmp_path_factory):
    """The runs through ingest --once's path (the real tailer into DuckDB), once."""
    logs = tmp_path_factory.mktemp("realtext") / "logs"
    for name in COLUMNS:
        shutil.copytree(REALDATA / name, logs / name)
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        for name, columns in COLUMNS.items():
            STORED[name] = mon.db.cursor().execute(
                f"SELECT step, {columns} FROM metrics_all WHERE run = $run ORDER BY line_id",
                {"run": name}).df().to_dict("records")
    yield
    STORED.clear()


def rows(name: str) -> list[dict]:
    return STORED[name]


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
