"""Alert latency and delivery under rate limiting, against the real server and a real webhook
receiver on 127.0.0.1 (issue 8, "Benchmark"). Prints, measured in one run:

- append -> webhook arrival latency, p50 and p99, for a `threshold` rule while lines are
  appended at 100 per second (target: p99 <= 500 ms; Grafana evaluates rules every 10 s at
  best). One line in ~120 crosses the threshold and the next falls back (notify_resolved off),
  so each message finds the webhook idle: this measures the path, not Slack's 1/s queue;
- a burst of 50 notifications while the receiver answers 429 with Retry-After: 1 to every
  fifth request: total time, and that each arrived exactly once, in order.

    python bench/alerts.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.webhook_receiver import Receiver, Reply  # noqa: E402
from tests.conftest import Server  # noqa: E402

LATENCY_RULES = """\
[[rule]]
name = "loss-high"
type = "threshold"
metric = "loss"
op = ">"
value = 5
notify_resolved = false
"""
BURST_RULES = """\
[[rule]]
name = "nan"
type = "nonfinite"
notify_resolved = false
"""
RATE = 100  # lines per second
EVERY = 120  # one crossing per 1.2 s: above Slack's 1 message/s, so no message queues


def latency(seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp, Receiver() as hook:
        logs = Path(tmp) / "logs"
        (logs / "lat").mkdir(parents=True)
        (logs / "alerts.toml").write_text(LATENCY_RULES)
        server = Server(logs, "--webhook", hook.url)
        try:
            appended = append_at_rate(logs / "lat" / "metrics.jsonl", seconds)
            time.sleep(2.0)
            notes = httpx.get(server.url + "/api/alerts", timeout=30).json()["notifications"]
        finally:
            server.stop()
        created = {n["facts"]["step"]: n["created_time"] for n in notes}
        arrivals = {}
        for record in hook.delivered():
            arrivals.setdefault(step_of(record.json()), record.time)
        steps = [s for s in appended if s in arrivals]
        total = sorted((arrivals[s] - appended[s]) * 1000 for s in steps)
        print(f"latency append -> webhook ({len(total)} messages, {RATE} lines/s, "
              f"{len(appended) - len(total)} not arrived): p50 {percentile(total, 50):.0f} ms, "
              f"p99 {percentile(total, 99):.0f} ms, max {total[-1]:.0f} ms "
              "(target p99 <= 500 ms)")
        stages = {"append -> notification written (ingest + rules)":
                  [(created[s] - appended[s]) * 1000 for s in steps if s in created],
                  "notification written -> arrival (delivery)":
                  [(arrivals[s] - created[s]) * 1000 for s in steps if s in created]}
        for name, values in stages.items():
            values.sort()
            print(f"  {name}: p50 {percentile(values, 50):.0f} ms, "
                  f"p99 {percentile(values, 99):.0f} ms")


def step_of(slack: dict) -> int:
    fields = slack["blocks"][1]["fields"]
    return next(int(f["text"].split("\n")[1]) for f in fields if f["text"].startswith("*Step*"))


def append_at_rate(path: Path, seconds: float) -> dict[int, float]:
    """Lines at RATE per second; returns {step: append time} of each threshold crossing."""
    crossings, start = {}, time.monotonic()
    with open(path, "a") as out:
        for step in range(1, int(seconds * RATE) + 1):
            high = step % EVERY == 0
            out.write(json.dumps({"step": step, "loss": 10.0 if high else 1.0}) + "\n")
            out.flush()
            if high:
                crossings[step] = time.time()
            time.sleep(max(0.0, start + step / RATE - time.monotonic()))
    return crossings


def percentile(values: list[float], p: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def burst(count: int = 50) -> None:
    with tempfile.TemporaryDirectory() as tmp, Receiver() as hook:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        (logs / "alerts.toml").write_text(BURST_RULES)
        hook.script(*([Reply(), Reply(), Reply(), Reply(), Reply(429, "rate_limited",
                                                                 retry_after=1)] * count))
        server = Server(logs, "--webhook", hook.url)
        try:
            started = time.time()
            for i in range(count):
                (logs / f"run{i:02d}").mkdir()
                (logs / f"run{i:02d}" / "metrics.jsonl").write_text(
                    json.dumps({"step": 1, "loss": float("nan")}) + "\n")
            deadline = time.monotonic() + count * 3 + 30
            while len(hook.delivered()) < count and time.monotonic() < deadline:
                time.sleep(0.2)
            took = (hook.delivered()[-1].time - started) if hook.delivered() else float("nan")
            time.sleep(2.0)
        finally:
            server.stop()
        check_burst(hook, count, took)


def check_burst(hook: Receiver, count: int, took: float) -> None:
    records = hook.snapshot()
    keys = [r.key for r in hook.delivered()]
    runs = sorted(r.json()["text"].split(" on ")[1].split(":")[0] for r in hook.delivered())
    limited = [b.time - a.time for a, b in itertools.pairwise(records)
               if a.status == 429]
    gaps = [b.time - a.time for a, b in itertools.pairwise(records)]
    print(f"burst of {count} with 429 (Retry-After: 1) every 5th answer: {len(keys)} delivered "
          f"({len(set(keys))} distinct keys, runs {'all' if len(set(runs)) == count else 'NOT all'}"
          f" present), {len(records)} requests, {sum(r.status == 429 for r in records)} 429s, "
          f"total {took:.1f} s; shortest gap {min(gaps):.3f} s, shortest wait after a 429 "
          f"{min(limited, default=float('nan')):.3f} s")
    ok = len(keys) == len(set(keys)) == count and len(set(runs)) == count
    print("burst: nothing lost or duplicated" if ok else "burst: LOST OR DUPLICATED messages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="latency run length")
    parser.add_argument("--latency-only", action="store_true", help="skip the burst")
    args = parser.parse_args()
    latency(args.seconds)
    if not args.latency_only:
        burst()


if __name__ == "__main__":
    main()
