"""Generates the seed incident (../shared/seed/checkpoint-cliff.txt) as log format v1.

A DFlash drafter run logged every 10 s (about two steps per line) with:
- blocking checkpoint saves at steps 2000 and 4001: 167.2 s and 112.0 s with no log line
  (27 and 18 steps unlogged), then loss jumps from ~0.8 to 13.0 (step 2029) and ~0.7 to 7.2
  (step 4021) and recovers;
- an epoch boundary at step 4228 where the length-bucketed shuffle serves homogeneous batches:
  accuracy 0.1606 -> 0.0916 -> 0.0371 -> 0.0356 -> near zero, with no time gap;
- normal noise, a warm-up ramp of lr, a 12% accuracy wobble and one 40% slower interval, none of
  which is an incident.

``python samples/seed_cliff.py`` rewrites ``samples/seed-cliff`` (metrics, events, run.json)
and ``samples/seed-cliff-plain`` (the seed's eleven fields only, nothing else).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS_PER_EPOCH = 2114
LAST_STEP = 4500
TOKENS_PER_STEP = 130_000  # 26 Ktok/s at 5 s per step
CHECKPOINTS = {2000: (167.2, 2027), 4001: (112.0, 4019)}  # step -> (gap s, next logged step)
SPIKES = {2029: 13.0, 4021: 7.24}
CLIFF = [0.1606, 0.0916, 0.0371, 0.0356]
CLIFF_STEP = 4229
SLOW_LINE_STEP = 1501  # one interval 40% slower (14 s): harmless
WOBBLE_STEP = 3001  # accuracy 12% lower for one line: harmless


def logged_steps() -> list[int]:
    steps, step = [], 1
    while step <= LAST_STEP:
        steps.append(step)
        if step in CHECKPOINTS:
            step = CHECKPOINTS[step][1]
            continue
        nxt = step + 2  # about two steps per line, as in the seed
        # land exactly on the seed's checkpoint and cliff steps
        step = min([nxt] + [m for m in (*CHECKPOINTS, CLIFF_STEP, *SPIKES) if step < m < nxt])
    return steps


def lines(rng: random.Random) -> list[dict]:
    out, elapsed, prev, recovery = [], 0.0, None, 0.0
    cliff_i = None
    for step in logged_steps():
        if prev is not None:
            elapsed += CHECKPOINTS[prev][0] if prev in CHECKPOINTS else 10.0
            elapsed += 4.0 if step == SLOW_LINE_STEP else 0.0
        loss = 0.8 - 0.1 * min(step, 4000) / 4000 + rng.gauss(0, 0.02)
        acc = 0.14 + 0.02 * min(step, 4000) / 4000 + rng.gauss(0, 0.004)
        if step in SPIKES:
            recovery = SPIKES[step] - loss
        if recovery > 0.0:
            loss, recovery = loss + recovery, recovery * 0.35 if recovery > 0.05 else 0.0
        if step == WOBBLE_STEP:
            acc *= 0.88
        if step >= CLIFF_STEP:
            cliff_i = 0 if cliff_i is None else cliff_i + 1
            acc = CLIFF[cliff_i] if cliff_i < len(CLIFF) else abs(rng.gauss(0.004, 0.002))
        lr = 3e-4 * min(1.0, step / 200) * (0.5 + 0.5 * math.cos(math.pi * step / 9000))
        out.append({
            "step": step, "loss": round(loss, 4), "accuracy": round(acc, 4),
            "avg_streak": round(1.0 + 6 * acc + rng.gauss(0, 0.02), 4), "lr": lr,
            "noise_std": round(0.05 * (1 - step / 9000), 5),
            "tgt_batch_per_sec": round(11.8 + rng.gauss(0, 0.2), 2),
            "dft_batch_per_sec": round(47.0 + rng.gauss(0, 0.5), 2),
            "tok_per_sec": round(26000 + rng.gauss(0, 300), 1),
            "hs_queue_depth": rng.choice([3, 4, 4, 4]), "elapsed_s": round(elapsed, 1),
        })
        prev = step
    return out


def enrich(rows: list[dict], rng: random.Random) -> list[dict]:
    """Adds what our trainer logs: epoch and the bucket of each micro-batch."""
    prev_step = 0
    for row in rows:
        epoch = (row["step"] - 1) // STEPS_PER_EPOCH
        micro = 4 * (row["step"] - prev_step)  # grad_accum=4
        if row["step"] >= 2 * STEPS_PER_EPOCH and row["step"] < CLIFF_STEP + 60:
            buckets = [5] * micro  # the new epoch's shuffle put one bucket first
        else:
            buckets = [rng.choice([5, 5, 5, 0, 1, 2, 3, 4]) for _ in range(micro)]
        row["epoch"], row["buckets"] = epoch, buckets
        prev_step = row["step"]
    return rows


def events(rows: list[dict]) -> list[dict]:
    at = {r["step"]: r["elapsed_s"] for r in rows}
    out = [{"event": "run_start", "step": 0, "elapsed_s": 0.0}]
    for epoch in range(3):
        step = epoch * STEPS_PER_EPOCH
        out.append({"event": "epoch_start", "step": step, "epoch": epoch,
                    "elapsed_s": _near(at, step)})
    for step, (gap, _) in CHECKPOINTS.items():
        start = at[step] + 1.0
        out.append({"event": "checkpoint_start", "step": step, "elapsed_s": start,
                    "path": f"ckpt/step-{step}"})
        out.append({"event": "checkpoint_end", "step": step, "elapsed_s": start + gap - 12.0,
                    "duration_s": round(gap - 12.0, 1), "blocked_s": round(gap - 12.0, 1),
                    "bytes": 1_342_177_280, "path": f"ckpt/step-{step}"})
    out.append({"event": "run_end", "step": rows[-1]["step"], "status": "completed",
                "elapsed_s": rows[-1]["elapsed_s"] + 1.0})
    return sorted(out, key=lambda e: e["elapsed_s"])


def _near(at: dict[int, float], step: int) -> float:
    before = [s for s in at if s <= step]
    return at[max(before)] if before else 0.0


def write(folder: Path, rows: list[dict], extra: list[dict] | None, meta: dict | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if extra is not None:
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in extra))
    if meta is not None:
        (folder / "run.json").write_text(json.dumps(meta, indent=2) + "\n")


def main() -> None:
    plain = lines(random.Random(7))
    write(HERE / "seed-cliff-plain", plain, None, None)
    rich = enrich([dict(r) for r in plain], random.Random(8))
    buckets = [{"id": i, "min_len": lo, "max_len": hi} for i, (lo, hi) in enumerate(
        [(1, 256), (257, 512), (513, 1024), (1025, 2048), (2049, 3295), (3296, 8192)])]
    meta = {"format": "cliffwatch/1", "run_id": "seed-cliff", "started_at": "2026-01-10T08:00:00Z",
            "config": {"token_budget": 49152, "max_batch_size": 64, "grad_accum": 4,
                       "shuffle": "bucketed", "ckpt_every": 2000, "log_every_s": 10},
            "buckets": buckets, "steps_per_epoch": STEPS_PER_EPOCH, "world_size": 8}
    write(HERE / "seed-cliff", rich, events(rich), meta)


if __name__ == "__main__":
    main()
