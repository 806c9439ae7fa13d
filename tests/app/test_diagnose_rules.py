"""The detector's rules are written once (issue 10, section 1): queries/spikes.sql and
queries/cliffs.sql receive them as parameters, their documented defaults are the detector's,
and on randomized series (seeded: levels, noise, spikes, drops, plateaus, NaN, infinities and
lines without the metric) the SQL lists exactly the lines the detector judges, with the
default rules and with random ones, including the bar a spike's history sets (issue 11: the
run's usual sudden rise, so a heavy-tailed metric's texture is no spike). queries/divergences.sql
lists exactly the lines the detector's divergence rule holds for (issue 19), with its rules and
random ones."""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import pytest

from app.db import queries
from app.diagnose.detect import NONFINITE, SQL_PARAMS, Watch, divergence_mask, shift_mask
from app.diagnose.load import run_lines
from tests.app.test_ingest_bad_input import ingest

RUNS = 12


def series(rng: random.Random, n: int) -> list[float | None]:
    level, sd = 10 ** rng.uniform(-2, 1), rng.choice([0.0, 0.001, 0.02, 0.1, 0.3])
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.02:
            level *= rng.choice([0.2, 0.5, 2.0, 5.0])  # a change of level
        value = level * (1 + rng.gauss(0, sd))
        if roll > 0.97:
            value *= rng.uniform(1.5, 20)  # a spike
        elif roll > 0.94:
            value *= rng.uniform(0.05, 0.7)  # a drop
        elif roll > 0.93:
            value = rng.choice([math.nan, math.inf, -math.inf])
        elif roll > 0.91:
            value = None  # not logged on this line
        out.append(None if value is None else round(value, rng.choice([2, 4, 8])))
    return out


def random_rules(rng: random.Random, name: str) -> dict:
    window = rng.randint(3, 30)
    rules = {"window": window, "min_lines": rng.randint(1, window), "floor": rng.uniform(0, 0.05),
             "sigmas": rng.uniform(1, 10)}
    if name == "spikes":
        return {**rules, "ratio": rng.uniform(1.1, 3.0), "sudden": rng.uniform(0.1, 0.9),
                "history": rng.randint(1, 300), "rank": rng.randint(1, 4),
                "margin": rng.uniform(0.5, 4.0)}
    return {**rules, "drop": rng.uniform(0.05, 0.6), "stays": rng.randint(1, 5)}


def expected_steps(kind: str, steps: np.ndarray, values: np.ndarray, rules: dict) -> list:
    _, mask, _, _ = shift_mask(kind, values, rules)
    if kind == "cliff":  # the SQL lists the first line of each run of lines
        mask = mask & ~np.concatenate([[False], mask[:-1]])
    return [int(s) for s in steps[mask]]


@pytest.fixture(scope="module")
def monitor(tmp_path_factory):
    rng = random.Random(20240610)
    logdir = tmp_path_factory.mktemp("rules") / "logs"
    for r in range(RUNS):
        (logdir / f"r{r}").mkdir(parents=True)
        n = rng.randint(30, 400)
        loss, acc = series(rng, n), series(rng, n)
        lines = [{"step": i, **({"loss": x} if x is not None else {}),
                  **({"acc": y} if y is not None else {})} for i, (x, y) in
                 enumerate(zip(loss, acc, strict=True))]
        (logdir / f"r{r}" / "metrics.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in lines))
    with ingest(logdir) as mon:
        yield mon


@pytest.mark.parametrize("rules_seed", [None, 1, 2, 3])
@pytest.mark.parametrize(("name", "kind"), [("spikes", "spike"), ("cliffs", "cliff")])
def test_sql_and_detector_judge_the_same_lines(monitor, name, kind, rules_seed):
    cursor = monitor.db.cursor()
    rng = random.Random(rules_seed)
    hits = barred = 0
    for metric in ("loss", "acc"):
        for r in range(RUNS):
            rules = SQL_PARAMS[name] if rules_seed is None else random_rules(rng, name)
            passed = {} if rules_seed is None else rules  # defaults: the header's own
            frame = run_lines(cursor, f"r{r}", Watch())
            values = frame[metric].to_numpy(dtype=float, na_value=np.nan)
            want = expected_steps(kind, frame["step"].to_numpy(), values, rules)
            got = [row[0] for row in queries.execute(
                cursor, name, {"run": f"r{r}", "metric": metric, **passed}).fetchall()]
            assert got == want, (name, metric, r, rules)
            hits += len(want)
            if kind == "spike":  # lines that only the run's usual rise (its history) rules out
                barred += len(expected_steps(kind, frame["step"].to_numpy(), values,
                                             {**rules, "margin": 0.0})) - len(want)
    assert hits > 5  # the series do have shifts for both to find
    assert barred > 0 or kind == "cliff"  # ... and spikes the history bar decides


@pytest.mark.parametrize("rules_seed", [None, 1, 2, 3])
def test_sql_and_detector_judge_the_same_divergences(monitor, rules_seed):
    cursor = monitor.db.cursor()
    rng = random.Random(rules_seed)
    hits = 0
    for metric in ("loss", "acc"):
        for r in range(RUNS):
            rules = SQL_PARAMS["divergences"] if rules_seed is None else {
                "ratio": rng.uniform(1.2, 6.0), "above": rng.uniform(0.5, 3.0),
                "stays": rng.randint(1, 5)}
            frame = run_lines(cursor, f"r{r}", Watch())
            bad = (frame[NONFINITE + metric].to_numpy(dtype=bool) if NONFINITE + metric in frame
                   else np.zeros(len(frame), dtype=bool))
            values = np.where(bad, np.nan, frame[metric].to_numpy(dtype=float, na_value=np.nan))
            hit = divergence_mask(values, bad, None, rules)[0]
            want = [int(s) for s in frame["step"].to_numpy()[hit]]
            got = [row[0] for row in queries.execute(cursor, "divergences", {
                "run": f"r{r}", "metric": metric,
                **({} if rules_seed is None else rules)}).fetchall()]
            assert got == want, (metric, r, rules)
            hits += len(want)
    assert hits > 5  # the series do climb and stay up now and then


@pytest.mark.parametrize("name", ["spikes", "cliffs", "divergences"])
def test_documented_defaults_are_the_detectors(name):
    params = queries.load(name).params
    for param, value in SQL_PARAMS[name].items():
        default = re.search(r"\(default: ([^)]*)\)", params[param].help).group(1)
        assert float(default) == value, (name, param)
        assert f"coalesce(${param}, {default})" in queries.load(name).sql, (name, param)
