"""Logging API benchmark (issue 21): `python bench/logapi.py [--calls N] [--steps S]`.

(a) `run.log()` calls per second (target >= 200,000): N calls back to back with three metrics
    each (a burst: the flusher writes them), and the same counting until every line is in the
    file; then the path a training loop takes (a line at a time, each written at once).
(b) overhead as a share of one demo-preset step (target <= 1%): the bundled trainer's `demo`
    preset trained for S steps on this CPU gives the step time; one step's logging is one
    `log()` of the trainer's line (14 keys and its buckets) written at once, plus its
    `rank_line` (nothing with one process).

Runs go to bench/out/logapi/ (git-ignored); the demo target is pre-trained there once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cliffwatch  # noqa: E402
from cliffwatch import writer  # noqa: E402

OUT = ROOT / "bench" / "out" / "logapi"
TRAINER_LINE = {"loss": 0.81, "accuracy": 0.16, "avg_streak": 1.9, "lr": 0.0003,
                "noise_std": 0.05, "tgt_batch_per_sec": 11.8, "dft_batch_per_sec": 47.1,
                "tok_per_sec": 26012.4, "hs_queue_depth": 4, "grad_norm": 0.42, "epoch": 1,
                "buckets": [5, 5, 2, 5]}


def fresh_run(name: str) -> cliffwatch.Run:
    shutil.rmtree(OUT / name, ignore_errors=True)
    return cliffwatch.init(logdir=OUT, name=name, system=False)


def burst(calls: int) -> tuple[float, float, float]:
    """(calls/s returned, calls/s until all lines are in the file, the same per CPU second of
    this process, flusher included: what a machine shared with other work does not skew)."""
    run = fresh_run("burst")
    values = {"loss": 0.81, "accuracy": 0.16, "lr": 3e-4}
    started, cpu = time.perf_counter(), time.process_time()
    for step in range(calls):
        run.log(values, step=step)
    returned = time.perf_counter() - started
    run.finish()
    written, cpu = time.perf_counter() - started, time.process_time() - cpu
    lines = (run.dir / "metrics.jsonl").read_bytes().count(b"\n")
    assert lines == calls, (lines, calls)
    return calls / returned, calls / written, calls / cpu


def one_at_a_time(values: dict, calls: int) -> tuple[float, float]:
    """(wall, CPU) seconds per log() when each line is written at once (a loop's pace)."""
    run = fresh_run("paced")
    writer.BURST_S, saved = 0.0, writer.BURST_S  # every line takes the direct path
    try:
        started, cpu = time.perf_counter(), time.process_time()
        for step in range(calls):
            run.log(values, step=step)
            run.rank_line(step, step_time_s=0.1, data_wait_s=0.0)
        wall = (time.perf_counter() - started) / calls
        cpu = (time.process_time() - cpu) / calls
    finally:
        writer.BURST_S = saved
    run.finish()
    return wall, cpu


def demo_step_s(steps: int) -> float:
    """Wall seconds per optimizer step of the demo preset on this machine (no checkpoints;
    the target is pre-trained into bench/out/logapi/.target-cache/ the first time)."""
    from trainer.config import make_config
    from trainer.train import train

    out = OUT / "demo"
    shutil.rmtree(out, ignore_errors=True)
    summary = train(make_config("demo", out=str(out), steps=steps, ckpt_every=0,
                                progress="off", system_metrics=False))
    return summary["loop_s"] / summary["step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="log() calls for (a)")
    parser.add_argument("--steps", type=int, default=60, help="demo-preset steps for (b)")
    args = parser.parse_args()
    returned, written, per_cpu = burst(args.calls)
    paced, paced_cpu = one_at_a_time({"loss": 0.81, "accuracy": 0.16, "lr": 3e-4}, 20_000)
    print(f"(a) log() with 3 metrics, {args.calls:,} calls back to back:")
    print(f"    {returned:,.0f} calls/s returned  (target >= 200,000)")
    print(f"    {written:,.0f} calls/s until every line was in the file "
          f"({per_cpu:,.0f} per CPU second)")
    print(f"    one line at a time, each written at once: {1 / paced:,.0f} calls/s "
          f"({paced * 1e6:.1f} us a call, {paced_cpu * 1e6:.1f} us of CPU)")
    line_s, line_cpu = one_at_a_time(TRAINER_LINE, 20_000)
    step_s = demo_step_s(args.steps)
    cores = len(os.sched_getaffinity(0))
    print(f"(b) the trainer's line (12 metrics and its buckets): {line_s * 1e6:.1f} us a step "
          f"({line_cpu * 1e6:.1f} us of CPU)")
    print(f"    demo preset on {cores} CPU cores: {step_s * 1e3:.1f} ms a step "
          f"(over {args.steps} steps)")
    print(f"    logging every step: {100 * line_s / step_s:.4f}% of a step  (target <= 1%)")
    print(f"    load average while measured: {os.getloadavg()[0]:.1f} on {cores} cores")

if __name__ == "__main__":
    main()
