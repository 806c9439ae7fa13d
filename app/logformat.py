"""Validator for log format v1 (docs/log-format.md).

Used by `python -m app validate RUN_DIR` and by the trainer's tests, which check that every line
the bundled trainer writes follows the contract. It reports problems as strings such as::

    metrics.jsonl:3: 'step' must be an integer within 64 bits, got "12"
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .keys import BUCKETS, CLOCKS, EPOCH, EVENT, FORMAT_KEYS, STEP, is_step

FORMAT = "cliffwatch/1"
EVENT_KINDS = {
    "run_start": (),
    "run_end": ("status",),
    "checkpoint_start": (),
    "checkpoint_end": ("duration_s", "blocked_s", "bytes"),
    "epoch_start": ("epoch",),
    "resume": ("from_step", "checkpoint"),
}
RUN_END_STATUS = {"completed", "failed", "interrupted"}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_step(obj: dict) -> list[str]:
    if STEP not in obj:
        return [f"missing '{STEP}'"]
    if not is_step(obj[STEP]):  # ingest refuses the same lines (parse.py)
        return [f"'{STEP}' must be an integer within 64 bits, got {json.dumps(obj[STEP])}"]
    return []


def check_metrics_line(obj: object) -> list[str]:
    """Problems of one `metrics.jsonl` line, already decoded (empty list: valid)."""
    if not isinstance(obj, dict):
        return [f"a line must be a JSON object, got {type(obj).__name__}"]
    if EVENT in obj:
        return check_event(obj)
    problems = check_step(obj)
    for key in CLOCKS:
        if key in obj and not (_is_number(obj[key]) and math.isfinite(obj[key])):
            problems.append(f"'{key}' must be a finite number, got {json.dumps(obj[key])}")
    if EPOCH in obj and not _is_number(obj[EPOCH]):
        problems.append(f"'{EPOCH}' must be a number, got {json.dumps(obj[EPOCH])}")
    if BUCKETS in obj:
        buckets = obj[BUCKETS]
        if not (isinstance(buckets, list) and all(_is_int(b) for b in buckets)):
            problems.append(f"'{BUCKETS}' must be a list of integers, got {json.dumps(buckets)}")
    for key, value in obj.items():
        if key not in FORMAT_KEYS and value is not None and not _is_number(value):
            problems.append(f"metric '{key}' must be a number or null, got {json.dumps(value)}")
    return problems


def check_event(obj: object) -> list[str]:
    """Problems of one event object (from `events.jsonl` or an `event` line)."""
    if not isinstance(obj, dict):
        return [f"an event must be a JSON object, got {type(obj).__name__}"]
    kind = obj.get(EVENT)
    if not isinstance(kind, str):
        return [f"'{EVENT}' must be a string, got {json.dumps(kind)}"]
    problems = check_step(obj)
    for key in EVENT_KINDS.get(kind, ()):
        if key not in obj:
            problems.append(f"{kind} event lacks '{key}'")
    if kind == "run_end" and obj.get("status") not in RUN_END_STATUS:
        problems.append(f"run_end 'status' must be one of {sorted(RUN_END_STATUS)}")
    return problems


def check_rank_line(obj: object) -> list[str]:
    """Problems of one `rank{N}.jsonl` line."""
    problems = check_metrics_line(obj)
    if not problems:
        for key in ("step_time_s", "data_wait_s"):
            if key not in obj:
                problems.append(f"rank line lacks '{key}'")
    return problems


def check_run_json(obj: object) -> list[str]:
    """Problems of a `run.json` document."""
    if not isinstance(obj, dict):
        return ["run.json must hold a JSON object"]
    problems = []
    if obj.get("format") != FORMAT:
        problems.append(f"run.json 'format' must be {FORMAT!r}, got {obj.get('format')!r}")
    for bucket in obj.get("buckets", []):
        if not (isinstance(bucket, dict) and {"id", "min_len", "max_len"} <= bucket.keys()):
            problems.append(f"run.json bucket {bucket!r} needs id, min_len and max_len")
    for key in ("steps_per_epoch", "world_size"):
        if key in obj and not _is_int(obj[key]):
            problems.append(f"run.json '{key}' must be an integer")
    return problems


def _check_jsonl(path: Path, check) -> list[str]:
    problems = []
    with path.open("rb") as handle:
        data = handle.read()
    if data and not data.endswith(b"\n"):
        problems.append(f"{path.name}: last line has no newline")
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            problems.append(f"{path.name}:{number}: not JSON ({exc})")
            continue
        problems.extend(f"{path.name}:{number}: {p}" for p in check(obj))
    return problems


def validate_run(run_dir: str | Path) -> list[str]:
    """Every problem found in a run folder; an empty list means it follows format v1."""
    run_dir = Path(run_dir)
    problems = []
    if not (run_dir / "metrics.jsonl").exists():
        problems.append(f"{run_dir}: no metrics.jsonl")
    checks = {"metrics.jsonl": check_metrics_line, "events.jsonl": check_event}
    for name, check in checks.items():
        if (run_dir / name).exists():
            problems.extend(_check_jsonl(run_dir / name, check))
    for rank_file in sorted(run_dir.glob("rank*.jsonl")):
        problems.extend(_check_jsonl(rank_file, check_rank_line))
    if (run_dir / "run.json").exists():
        try:
            problems.extend(check_run_json(json.loads((run_dir / "run.json").read_text())))
        except ValueError as exc:
            problems.append(f"run.json: not JSON ({exc})")
    return problems
