"""Routine evaluations that the log announces with events are no stalls. The Hugging Face and
Lightning callbacks write ``eval_start`` / ``eval_end`` around each evaluation; diagnosis judged
an evaluation pause against the run's earlier ones only where the evaluation was a row of table
evals, so a run evaluating every 10 steps through a callback had each routine pause reported as
a stall (named ``evaluation``, but a stall all the same)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_cli

EVAL_S = 3.0  # each evaluation pass, against 0.1 s between training lines


def evaluating_run(folder: Path, evals: tuple[int, ...]) -> None:
    """60 training lines 0.1 s apart, with an evaluation of EVAL_S after each step in ``evals``
    (the Trainer's order: the step's line, then the evaluation, then the next step)."""
    folder.mkdir(parents=True)
    lines, events, clock = [], [], 0.0
    for step in range(1, 61):
        clock += 0.1
        lines.append({"step": step, "loss": 3.0 - 0.01 * step, "elapsed_s": round(clock, 3)})
        if step in evals:
            events += [{"event": "eval_start", "step": step, "elapsed_s": round(clock, 3)},
                       {"event": "eval_end", "step": step, "duration_s": EVAL_S,
                        "elapsed_s": round(clock + EVAL_S, 3)}]
            clock += EVAL_S
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in events))


def stalls(told: str, run: str) -> list[int]:
    """The steps of the stalls ``diagnose`` reports for ``run`` ("1. RUN: STALL at step N: ...")."""
    return [int(step) for step in re.findall(rf"\b{re.escape(run)}: STALL at step (\d+)", told)]


def test_routine_evaluations_announced_by_events_are_no_stalls(tmp_path):
    evaluating_run(tmp_path / "logs" / "evals", evals=(10, 20, 30, 40, 50))
    assert run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once").returncode == 0
    told = run_cli("diagnose", str(tmp_path / "logs")).stdout
    # the first pause has no earlier one to be judged against: the training gaps' yardstick
    assert stalls(told, "evals") == [11], told


def test_an_evaluation_far_slower_than_the_earlier_ones_still_stalls(tmp_path):
    folder = tmp_path / "logs" / "slow-eval"
    evaluating_run(folder, evals=(10, 20, 30, 40))
    # the evaluation at step 40 took 30 s instead of 3 s: a stall against the earlier passes
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        if line["step"] > 40:
            line["elapsed_s"] = round(line["elapsed_s"] + 27.0, 3)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once").returncode == 0
    told = run_cli("diagnose", str(tmp_path / "logs")).stdout
    assert stalls(told, "slow-eval") == [11, 41], told
