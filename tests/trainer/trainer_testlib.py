"""Helpers for reading a run folder in the trainer's tests."""

from __future__ import annotations

import json
import math
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def metrics(run: Path) -> list[dict]:
    return read_jsonl(run / "metrics.jsonl")


def events(run: Path, kind: str | None = None) -> list[dict]:
    found = read_jsonl(run / "events.jsonl")
    return [e for e in found if kind is None or e["event"] == kind]


def close(a: float, b: float, tol: float = 1e-6) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol
