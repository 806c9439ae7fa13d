"""Diagnosis benchmark (diagnosis issue). On a 1,000,000-line run with the seed's fields and a
few planted stalls and spikes, prints, measured in one run:

- whole-run diagnosis time (target <= 2 s),
- the `downsample` query of the run's loss to 2,000 points (target <= 100 ms),
- a plain SELECT count(*) on the same table as the yardstick,
- whether every loss value above the 99.99th percentile is in the downsampled result;

and the per-tick cost of live diagnosis (issue 10: flat, target <= 20 ms) on runs of 10,000,
100,000 and 1,000,000 lines that end in an open accuracy cliff, so that every new line grows an
incident: the median time of LiveDiagnosis.update() over ticks of one new line each (a median
of 50 by default: a single tick on a busy machine can take twice the usual), and beside it the
process's CPU time per tick, which other work on a shared machine disturbs less.

    python bench/diagnose.py [--lines 1000000] [--live 10000,100000,1000000] [--ticks 50]
    python bench/diagnose.py --lines 0      # the live figures only
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import settings as settings_mod  # noqa: E402
from app.db import queries  # noqa: E402
from app.db.readonly import run_readonly  # noqa: E402
from app.diagnose.detect import Watch  # noqa: E402
from app.diagnose.diagnosis import LiveDiagnosis, diagnose  # noqa: E402
from app.monitor import Monitor  # noqa: E402

STALLS = {200_000, 600_000}  # steps after a 150 s silence (lines are 10 s apart)
SPIKES = {200_002: 12.0, 600_002: 7.0, 800_000: 9.0}


def generate(path: Path, lines: int) -> None:
    rng = random.Random(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    elapsed = 0.0
    with path.open("w") as handle:
        for step in range(1, lines + 1):
            elapsed += 150.0 if step in STALLS else 10.0 * rng.uniform(0.98, 1.02)
            loss = SPIKES.get(step, 0.8 * rng.uniform(0.95, 1.05))
            handle.write(json.dumps({
                "step": step, "loss": loss, "accuracy": 0.16 * rng.uniform(0.97, 1.03),
                "avg_streak": 1.9, "lr": 3e-4, "noise_std": 0.05, "tgt_batch_per_sec": 11.8,
                "dft_batch_per_sec": 47.1, "tok_per_sec": 26000.0, "hs_queue_depth": 4,
                "elapsed_s": round(elapsed, 3)}) + "\n")


def line(rng: random.Random, step: int, elapsed: float, accuracy: float) -> str:
    return json.dumps({"step": step, "loss": 0.8 * rng.uniform(0.95, 1.05),
                       "accuracy": accuracy * rng.uniform(0.97, 1.03), "lr": 3e-4,
                       "elapsed_s": round(elapsed, 3),
                       "buckets": [rng.randrange(6) for _ in range(8)]}) + "\n"


def cliff_run(run: Path, lines: int) -> None:
    """A run whose accuracy falls for good 200 lines before its end, with a checkpoint event
    every 1,000 steps (the events a cause search reads)."""
    rng = random.Random(1)
    run.mkdir(parents=True, exist_ok=True)
    with (run / "metrics.jsonl").open("w") as handle:
        for step in range(1, lines + 1):
            handle.write(line(rng, step, 10.0 * step, 0.16 if step < lines - 200 else 0.005))
    with (run / "events.jsonl").open("w") as handle:
        for step in range(1000, lines + 1, 1000):
            handle.write(json.dumps({"kind": "checkpoint_end", "step": step,
                                     "elapsed_s": 10.0 * step, "blocked_s": 2.0}) + "\n")


def live_tick_ms(lines: int, ticks: int) -> tuple[float, float, float]:
    """Median and worst LiveDiagnosis.update() time per tick of one new (still low) line, and
    the median CPU time of this process (DuckDB's threads included) per tick."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "logs" / "open"
        cliff_run(run, lines)
        with Monitor.open(run.parent, settings_mod.resolve()) as monitor:
            monitor.tailer.catch_up()
            live = LiveDiagnosis(monitor.db, Watch())
            live.update()  # the catch-up: every line so far, not a tick
            rng, times, cpu = random.Random(2), [], []
            for step in range(lines + 1, lines + 1 + ticks):
                with (run / "metrics.jsonl").open("a") as handle:
                    handle.write(line(rng, step, 10.0 * step, 0.005))
                monitor.tailer.tick(discover=False)
                started = time.process_time()
                changed, seconds = timed(live.update)
                cpu.append((time.process_time() - started) * 1000)
                assert changed >= 1, "the open cliff should grow on every tick"
                times.append(seconds * 1000)
    return sorted(times)[len(times) // 2], max(times), sorted(cpu)[len(cpu) // 2]


def timed(func):
    started = time.perf_counter()
    result = func()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--live", default="10000,100000,1000000")
    parser.add_argument("--ticks", type=int, default=50)
    args = parser.parse_args()
    for lines in [int(x) for x in args.live.split(",") if x]:
        median, worst, cpu = live_tick_ms(lines, args.ticks)
        print(f"live diagnosis, open cliff, {lines:,} lines: {median:.1f} ms per tick "
              f"(median of {args.ticks}; worst {worst:.1f} ms; CPU {cpu:.1f} ms; "
              f"target <= 20 ms, flat)")
    if args.lines:
        whole_run(args)


def whole_run(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        generate(logs / "big" / "metrics.jsonl", args.lines)
        with Monitor.open(logs, settings_mod.resolve()) as monitor:
            monitor.tailer.catch_up()
            cursor = monitor.db.cursor()
            found, diagnose_s = timed(lambda: diagnose(cursor, Watch(), ["big"]))
            _, count_s = timed(lambda: cursor.execute("SELECT count(*) FROM metrics_all")
                               .fetchall())
            query = queries.load("downsample")
            params = {"run": "big", "metric": "loss", "points": 2000}
            def downsample():
                return run_readonly(cursor, query.text(), params=params, max_rows=100_000,
                                    time_limit=60).rows

            points, downsample_s = timed(downsample)  # the first call: cold caches
            warm = sorted(timed(downsample)[1] for _ in range(5))[2]
            extremes = cursor.execute(
                "SELECT step, loss FROM metrics WHERE run = 'big' AND loss > "
                "(SELECT quantile_cont(loss, 0.9999) FROM metrics WHERE run = 'big')").fetchall()
    kept = set(points)
    missing = [e for e in extremes if e not in kept]
    print(f"run: {args.lines:,} lines; incidents found: "
          + ", ".join(f"{i.kind}@{i.step}" for i in found))
    print(f"whole-run diagnosis: {diagnose_s * 1000:.0f} ms (target <= 2000 ms)")
    print(f"downsample to 2,000 points: {downsample_s * 1000:.1f} ms first call, "
          f"{warm * 1000:.1f} ms median of the next 5, {len(points):,} points "
          f"(target <= 100 ms)")
    print(f"yardstick SELECT count(*): {count_s * 1000:.1f} ms")
    print(f"values above the 99.99th percentile: {len(extremes)}, all in the downsampled result: "
          f"{'yes' if not missing else f'NO, {len(missing)} missing'}")


if __name__ == "__main__":
    main()
