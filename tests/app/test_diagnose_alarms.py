"""Diagnosis must not cry wolf (issue 10, section 1): a run's fast early phase, where grad_norm
jumps after a few lines and stays high for 25 (a change of level, as in the demo), is no spike,
and a million lines of pure uniform noise hold no spike or cliff. Nor do heavy-tailed ones
(exponential, lognormal; a gradient norm's single steps are like that): 2,893 and 1,290 spikes
in a million lines before a spike had to outgrow the run's usual sudden rise. A run longer than
that history, fed in batches of any size, gives what the whole run gives, spikes that the
history rules out included. The seed's own incidents are still found
(tests/app/test_diagnose.py); real logs: tests/app/test_diagnose_realdata.py."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd

from app.diagnose.detect import CLOCK, SPIKE_HISTORY, SQL_PARAMS, RunDetector, Watch, shift_mask
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


def lines_of(**metrics: np.ndarray) -> pd.DataFrame:
    n = len(next(iter(metrics.values())))
    return pd.DataFrame({"line_id": np.arange(n), "step": np.arange(n),
                         "attempt": np.ones(n, dtype=np.int64), CLOCK: np.full(n, np.nan),
                         **metrics})


def test_a_million_lines_of_uniform_noise_hold_no_incident():
    values = np.random.default_rng(1).uniform(0.0, 1.0, 1_000_000)
    assert RunDetector("noise", Watch()).feed(lines_of(loss=values, accuracy=values)) == []


def test_a_million_lines_of_heavy_tailed_noise_hold_next_to_no_spike():
    """What is left is early: a jump of 10x in the first lines, before the run has shown its
    tail, can still be called a spike (here: the exponential's 8.4 at line 28)."""
    rng = np.random.default_rng(1)
    exponential = rng.exponential(1.0, 1_000_000)
    lognormal = rng.lognormal(0.0, 0.5, 1_000_000)
    found = RunDetector("noise", Watch()).feed(lines_of(loss=exponential, grad_norm=lognormal))
    assert len(found) <= 2 and all(i.kind == "spike" and i.step < 100 for i in found), found


def heavy_tailed_run(rng: np.random.Generator, n: int) -> np.ndarray:
    """A gradient norm like llm.c's: lognormal noise around 0.3, a jump to 2-3x it every few
    hundred lines, and a 15x spike near the end."""
    grad = 0.3 * rng.lognormal(0.0, 0.08, n)
    for line in range(300, n, int(rng.integers(300, 900))):
        grad[line] *= rng.uniform(2.0, 3.5)
    grad[n - 700] = 4.5
    return grad


def test_a_long_heavy_tailed_run_fed_in_batches_gives_the_whole_runs_spikes():
    rng = np.random.default_rng(3)
    n = SPIKE_HISTORY + 5_000
    grad = heavy_tailed_run(rng, n)
    frame = lines_of(grad_norm=grad, loss=2.0 + 0.01 * rng.standard_normal(n))
    whole = [(i.kind, i.metric, i.step, i.end_step, i.value, i.baseline)
             for i in RunDetector("r", Watch()).feed(frame)]
    live, found, start = RunDetector("r", Watch()), {}, 0
    while start < n:  # batches of any size, single lines around the big spike
        size = 1 if abs(start - (n - 700)) < 40 else int(rng.integers(1, 400))
        for incident in live.feed(frame.iloc[start:start + size].reset_index(drop=True)):
            found[incident.key] = incident
        start += size
    assert live.rise_base > 0 and len(live.frame) < 100  # it kept only what it needs
    assert sorted(whole) == sorted((i.kind, i.metric, i.step, i.end_step, i.value, i.baseline)
                                   for i in found.values())
    assert ("spike", "grad_norm", n - 700) in [w[:3] for w in whole]
    barred = shift_mask("spike", grad, {**SQL_PARAMS["spikes"], "margin": 0.0})[1]
    assert barred.sum() > len(whole) + 5  # most jumps were the run's texture
