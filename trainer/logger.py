"""Writes log format v1 (docs/log-format.md): metrics.jsonl, events.jsonl, run.json, rank files.

Rank 0 writes `metrics.jsonl` and `events.jsonl`; with several processes every rank also
writes `rank{N}.jsonl`. Files are opened for append, so a resumed run adds a new attempt.
Lines are plain `json.dumps`, which writes NaN/Infinity as the format asks. One line:

    {"step": 40, "loss": 2.31, "accuracy": 0.42, ..., "epoch": 0, "buckets": [3, 0, 5, 1],
     "elapsed_s": 12.503, "time": 1795939200.12}
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

FORMAT = "cliffwatch/1"


class RunLogger:
    def __init__(self, out: Path, rank: int, world: int, started: float) -> None:
        self.out, self.rank, self.world, self.started = out, rank, world, started
        self.lock = threading.Lock()  # the async checkpoint thread logs events too
        out.mkdir(parents=True, exist_ok=True)
        self.metrics_file = self._open("metrics.jsonl") if rank == 0 else None
        self.events_file = self._open("events.jsonl") if rank == 0 else None
        self.rank_file = self._open(f"rank{rank}.jsonl") if world > 1 else None

    def _open(self, name: str) -> IO[str]:
        return (self.out / name).open("a", encoding="utf-8")

    def elapsed(self) -> float:
        """Seconds since this attempt started (the `elapsed_s` of every line)."""
        return round(time.monotonic() - self.started, 3)

    def _write(self, handle: IO[str] | None, obj: dict) -> None:
        if handle is None:
            return
        line = json.dumps(obj) + "\n"
        with self.lock:
            handle.write(line)
            handle.flush()  # a monitor tails these files: make each line visible at once

    def metrics(self, step: int, values: dict) -> None:
        self._write(
            self.metrics_file,
            {"step": step, **values, "elapsed_s": self.elapsed(), "time": time.time()},
        )

    def event(self, kind: str, step: int, /, **extra: object) -> None:
        line = {"event": kind, "step": step, **extra}
        self._write(self.events_file, {**line, "elapsed_s": self.elapsed(), "time": time.time()})

    def rank_line(self, step: int, step_time_s: float, data_wait_s: float) -> None:
        line = {"step": step, "rank": self.rank, "step_time_s": round(step_time_s, 4)}
        line.update(data_wait_s=round(data_wait_s, 4), elapsed_s=self.elapsed())
        self._write(self.rank_file, line)

    def run_json(self, config: dict, buckets: list[dict], steps_per_epoch: int) -> None:
        """run.json, replaced atomically (written at start and again on resume)."""
        if self.rank != 0:
            return
        doc = {
            "format": FORMAT,
            "run_id": self.out.name,
            "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "config": config,
            "buckets": buckets,
            "steps_per_epoch": steps_per_epoch,
            "world_size": self.world,
        }
        tmp = self.out / ".run.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.out / "run.json")

    def close(self) -> None:
        for handle in (self.metrics_file, self.events_file, self.rank_file):
            if handle is not None:
                handle.close()
