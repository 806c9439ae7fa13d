"""Resume exactness: N steps, then resume and N more == 2N steps straight (within 1e-6)."""

from __future__ import annotations

import torch
from trainer_testlib import close, events, metrics

N = 10  # crosses an epoch boundary (tiny: ~9 steps per epoch) and resumes mid-epoch


def params(run) -> dict:
    state = torch.load(run / "ckpt" / f"step-{2 * N}.pt", weights_only=False)
    return {"drafter": state["drafter"], "optimizer": state["optimizer"]["state"]}


def flat(tree) -> list[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        return [t for key in sorted(tree) for t in flat(tree[key])]
    return []


def test_resume_gives_the_same_parameters_and_losses(run_tiny):
    common = {"steps": 2 * N, "ckpt_every": N, "log_every_steps": 1}
    straight = run_tiny("straight", **common)
    split = run_tiny("split", stop_after=N, **common)
    assert events(split, "run_end")[-1]["status"] == "interrupted"
    run_tiny("split", resume="latest", **common)

    for a, b in zip(flat(params(straight)), flat(params(split)), strict=True):
        assert torch.allclose(a.float(), b.float(), atol=1e-6, rtol=0)
    want = [(line["step"], line["loss"]) for line in metrics(straight)]
    got = [(line["step"], line["loss"]) for line in metrics(split)]
    # attempt 2 starts by logging the checkpoint's step again: a step <= the previous one
    assert [s for s, _ in got] == [*range(1, N + 1), *range(N, 2 * N + 1)]
    timeline = dict(got)  # the monitor's current timeline: the newest line of each step
    assert list(timeline) == [s for s, _ in want]
    assert all(close(loss, timeline[step]) for step, loss in want)


def test_resume_logs_an_event_and_a_second_attempt(run_tiny):
    common = {"steps": 8, "ckpt_every": 4, "log_every_steps": 1}
    run = run_tiny("resumed", stop_after=4, **common)
    run_tiny("resumed", resume=str(run / "ckpt" / "step-4.pt"), **common)
    resume = events(run, "resume")
    assert len(resume) == 1 and resume[0]["from_step"] == 4
    assert resume[0]["checkpoint"].endswith("step-4.pt")
    starts = events(run, "run_start")
    assert [e["resumed"] for e in starts] == [False, True]
    assert [line["step"] for line in metrics(run)] == [1, 2, 3, 4, 4, 5, 6, 7, 8]
    epochs = [e["epoch"] for e in events(run, "epoch_start")]
    assert epochs == sorted(set(epochs))  # resuming mid-epoch starts no epoch twice
