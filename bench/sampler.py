"""System sampler benchmark (issue 21): the CPU the sampler thread takes from training.

Prints (a) the CPU seconds and wall time of one sample (`Sampler.sample`, called back to back
in this thread: psutil's counters, NVML where there is one, the line written to system.jsonl),
and that cost as a share of one core at `--sample-s`; (b) the share measured on the real
thing: the sampler started as `init` starts it, the main thread asleep for `--seconds`, the
process's CPU time over that wall time (a sleeping thread takes none, so all of it is the
sampler's).

    python bench/sampler.py [--sample-s 2.0] [--seconds 20] [--samples 500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from cliffwatch import system  # noqa: E402


def per_sample(run: Path, count: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one sample, over ``count`` back to back."""
    probe = system.Probe(psutil, run)
    probe.open_gpus()
    sampler = system.Sampler(run, probe, lambda: 0, 2.0)
    sampler.sample()  # the first one pays for imports and opening files
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(count):
        sampler.sample()
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    probe.close()
    return cpu / count, wall / count


def running_share(run: Path, sample_s: float, seconds: float) -> tuple[float, int]:
    """(share of one core, samples written) of a started sampler over ``seconds``."""
    cpu, wall = time.process_time(), time.perf_counter()
    sampler = system.start(run, rank=0, last_step=lambda: 0, sample_s=sample_s)
    time.sleep(seconds)
    sampler.stop()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    lines = len((run / system.FILE).read_text().splitlines())
    return cpu / wall, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-s", type=float, default=2.0, help="seconds between samples "
                        "(default 2.0, init's default)")
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="how long the started sampler runs for (b) (default 20)")
    parser.add_argument("--samples", type=int, default=500,
                        help="back-to-back samples timed for (a) (default 500)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cliffwatch-bench-") as tmp:
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        cpu, wall = per_sample(Path(tmp) / "a", args.samples)
        print(f"(a) one sample: {cpu * 1e3:.2f} ms CPU, {wall * 1e3:.2f} ms wall "
              f"-> {100 * cpu / args.sample_s:.3f}% of one core at sample_s={args.sample_s}")
        share, lines = running_share(Path(tmp) / "b", args.sample_s, args.seconds)
        print(f"(b) started sampler, {args.seconds:.0f} s at sample_s={args.sample_s}: "
              f"{100 * share:.3f}% of one core ({lines} samples written)")


if __name__ == "__main__":
    main()
