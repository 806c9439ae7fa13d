"""Benchmarks of the bundled trainer, printed in one run: `python bench/trainer.py`.

(a) blocked time of an async save / blocked time of a blocking save, same state and throttle
    (target <= 0.05);
(b) logging overhead as a share of step time (target <= 1%);
(c) drafter tokens/s on CPU for the demo preset;
(d) step-to-step loss variance of `--shuffle bucketed` vs `--shuffle mixed`, same seed.

Runs go to bench/out/trainer/ (git-ignored); the demo target is pre-trained there once.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainer.checkpoint import Saver  # noqa: E402
from trainer.config import make_config  # noqa: E402
from trainer.drafter import Drafter  # noqa: E402
from trainer.train import train  # noqa: E402

OUT = ROOT / "bench" / "out" / "trainer"


def demo_state() -> dict:
    """A checkpoint state of the demo preset's size: drafter, AdamW moments, counters."""
    config = make_config("demo", out="x")
    drafter = Drafter(config)
    optimizer = torch.optim.AdamW(drafter.parameters())
    for param in drafter.parameters():
        param.grad = torch.zeros_like(param)
    optimizer.step()
    return {"step": 1, "drafter": drafter.state_dict(), "optimizer": optimizer.state_dict()}


def blocked_seconds(mode: str, state: dict, mbps: float) -> tuple[float, float]:
    """(blocked_s, duration_s) of one save into a fresh folder."""
    ends: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        saver = Saver(Path(folder), mode, mbps, keep=1, on_event=lambda *a, **k: ends.append(k))
        blocked = saver.save(state, 1)
        saver.wait()
    return blocked, ends[-1]["duration_s"]


def bench_checkpoint(mbps: float, repeats: int) -> None:
    state = demo_state()
    blocking = [blocked_seconds("blocking", state, mbps)[0] for _ in range(repeats)]
    runs = [blocked_seconds("async", state, mbps) for _ in range(repeats)]
    a, b = statistics.median(r[0] for r in runs), statistics.median(blocking)
    size = sum(t.numel() * t.element_size() for t in state["drafter"].values()) * 3
    print(f"(a) checkpoint ~{size / 1e6:.1f} MB at --storage-mbps={mbps}, median of {repeats}:")
    print(f"    blocking save: blocked {b:.3f} s")
    took = statistics.median(r[1] for r in runs)
    print(f"    async save:    blocked {a:.4f} s (its write took {took:.3f} s)")
    print(f"    async / blocking blocked time = {a / b:.4f}  (target <= 0.05)")


def demo_run(name: str, steps: int, **overrides: object) -> tuple[dict, list[dict]]:
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    config = make_config("demo", out=str(out), steps=steps, ckpt_every=0, **overrides)
    summary = train(config)
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return summary, lines


def step_variance(lines: list[dict]) -> float:
    """Variance of loss[t+1] - loss[t] over the second half (past the steep first descent)."""
    losses = [line["loss"] for line in lines[len(lines) // 2 :]]
    return statistics.variance([b - a for a, b in itertools.pairwise(losses)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=240, help="optimizer steps per run")
    parser.add_argument("--mbps", type=float, default=2.0, help="throttle for (a), MB/s")
    args = parser.parse_args()
    started = time.monotonic()
    bench_checkpoint(args.mbps, repeats=3)

    timed, _ = demo_run("demo-timed", args.steps)  # the demo as shipped: a line every 2 s
    every, bucketed = demo_run("demo-every-step", args.steps, log_every_steps=1)
    _, mixed = demo_run("demo-mixed", args.steps, log_every_steps=1, shuffle="mixed")

    per_line = every["log_s"] / every["step"]
    print(f"(b) logging: {per_line * 1e3:.3f} ms per metrics line")
    print(f"    log every step:     {100 * every['log_s'] / every['loop_s']:.3f}% of loop time")
    print(f"    demo (every 2 s):   {100 * timed['log_s'] / timed['loop_s']:.4f}% of loop time"
          "  (target <= 1%)")  # fmt: skip
    tok_s = timed["tokens"] / timed["loop_s"]
    steps_s = timed["step"] / timed["loop_s"]
    cores = len(os.sched_getaffinity(0))
    print(f"(c) drafter throughput, demo preset on {cores} CPU cores: {tok_s:,.0f} tok/s "
          f"({steps_s:.2f} steps/s over {args.steps} steps, a line every 2 s)")  # fmt: skip
    print(f"(d) step-to-step loss variance over steps {args.steps // 2}-{args.steps}:")
    print(f"    bucketed: {step_variance(bucketed):.6f}")
    print(f"    mixed:    {step_variance(mixed):.6f}")
    print(f"total bench time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
