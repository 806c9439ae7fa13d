"""Diagnosis must not cry wolf (issue 10, section 1): a run's fast early phase, where grad_norm
jumps after a few lines and stays high for 25 (a change of level, as in the demo), is no spike,
and a million lines of pure uniform noise hold no spike or cliff. The seed's own incidents are
still found (tests/app/test_diagnose.py)."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd

from app.diagnose.detect import CLOCK, RunDetector, Watch
from app.diagnose.diagnosis import diagnose
from tests.app.test_ingest_bad_input import ingest


def warm_up_run(rng: random.Random) -> list[dict]:
    """Like the demo: 7 calm lines, 25 of the fast-learning phase, then calm again."""
    lines = []
    for i in range(120):
        if i < 7:
            grad = 0.63 * rng.uniform(0.97, 1.03)
        elif i < 32:
            grad = rng.uniform(0.99, 2.36)
        else:
            grad = 0.8 * rng.uniform(0.9, 1.1)
        loss = 6.0 * 0.98 ** i * rng.uniform(0.98, 1.02)
        lines.append({"step": 5 + 10 * i, "loss": loss, "grad_norm": grad,
                      "elapsed_s": 2.0 * i})
    return lines


def test_early_change_of_level_is_not_a_spike(tmp_path):
    run = tmp_path / "logs" / "demo"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in warm_up_run(random.Random(5))))
    with ingest(tmp_path / "logs") as mon:
        assert diagnose(mon.db.cursor(), Watch()) == []


def test_a_million_lines_of_uniform_noise_hold_no_incident():
    values = np.random.default_rng(1).uniform(0.0, 1.0, 1_000_000)
    n = len(values)
    frame = pd.DataFrame({"line_id": np.arange(n), "step": np.arange(n),
                          "attempt": np.ones(n, dtype=np.int64), CLOCK: np.full(n, np.nan),
                          "loss": values, "accuracy": values})
    assert RunDetector("noise", Watch()).feed(frame) == []
