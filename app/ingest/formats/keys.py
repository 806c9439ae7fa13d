"""One decoded JSONL dict from any trainer, as a log format v1 dict. LLaMA-Factory's line::

    {"current_steps": 10, "total_steps": 8660, "loss": 2.4977, "epoch": 0.0046,
     "percentage": 0.12, "elapsed_time": "0:00:24", "remaining_time": "5:58:33"}

becomes ``Normalised(kind="train", data={"step": 10, "loss": 2.4977, "epoch": 0.0046,
"elapsed_s": 24.0}, dropped=("total_steps", "percentage", "remaining_time"))``. A line our own
trainer writes (v1) comes out unchanged. The rules, stated once here (docs/formats.md has them
as a table):

- **step**: the first of ``STEP_ALIASES`` present at the top level; none: not a log line.
- **time**: ``ELAPSED_ALIASES`` give ``elapsed_s`` (seconds, or ``H:MM:SS``); ``TIME_ALIASES``
  give ``time`` (Unix seconds, or ISO 8601 text). The first alias that reads wins.
- **nesting**: objects are flattened with ``/``: ``{"train": {"loss": 1}}`` is ``train/loss``.
- **not metrics, dropped without a warning**: strings, lists (but v1's ``buckets``) and the
  progress keys in ``METADATA``. They are named in ``dropped`` so that a caller can say so once
  per file. Numbers, booleans and ``null`` are left for the ingest path to judge as v1 says.
- **kind**: see ``kind_of``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from ...keys import BUCKETS, ELAPSED_S, EPOCH, SPECIAL, STEP, TIME
from ...keys import EVENT as EVENT_KEY
from . import EVAL, EVENT, SUMMARY, TRAIN, Record
from .keymap import KeyMap

# wandb's own ``_step`` comes last: it counts log calls, a trainer's step is better when given
STEP_ALIASES = (STEP, "global_step", "current_steps", "iter", "iteration", "it", "_step")
ELAPSED_ALIASES = (ELAPSED_S, "elapsed_time", "_runtime")
TIME_ALIASES = (TIME, "timestamp", "_timestamp")
# progress-bar fields: derived from the step and the clock, so they are no measurement
METADATA = frozenset({"percentage", "remaining_time", "total_steps", "max_steps", "eta"})
SUMMARY_KEYS = frozenset({"train_runtime"})  # Hugging Face's end-of-training log entry
_EVAL_KEY = re.compile(r"(eval|val|valid|validation|test)[_/]", re.IGNORECASE)
_TRAIN_KEY = re.compile(r"train[_/]", re.IGNORECASE)
_CLOCK = re.compile(r"(?:(\d+) days?, )?(\d+):([0-5]?\d):([0-5]?\d(?:\.\d+)?)")
MAX_DEPTH = 64  # deeper objects are dropped, not flattened (parse.MAX_EVENT_DEPTH's reason)
# Unix times above these are in ms, µs or ns (1e11 s is the year 5138)
_SCALES = ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3))


_NO_MAP = KeyMap()


@dataclass
class Normalised:
    kind: str  # TRAIN, EVAL, SUMMARY or EVENT
    data: dict  # the v1 dict
    boundary: dict | None = None  # the epoch_start event a per-epoch summary row implies
    dropped: tuple[str, ...] = ()  # keys not read (strings, lists, METADATA)
    planned: dict | None = None  # the summary row of a training line at its planned total


def normalise(obj: dict, keymap: KeyMap | None = None) -> tuple[Normalised | None, str]:
    """``(Normalised, "")``, or ``(None, reason)`` for a dict with no step-like key.
    ``keymap``: a run's extra mappings (keymap.py), tried before the default aliases."""
    if EVENT_KEY in obj:  # a v1 event, whoever wrote it
        return Normalised(EVENT, obj), ""
    extra = keymap or _NO_MAP
    obj = extra.lifted(obj)
    step_aliases = _first(extra.step, STEP_ALIASES)
    step_key = next((k for k in step_aliases if k in obj), None)
    if step_key is None:
        return None, f"no step-like key ({', '.join(step_aliases)})"
    # key in obj -> (v1 key, value); the rest keeps its place, so a v1 line stays as it is
    renamed = {step_key: (STEP, _step(obj[step_key], exact=step_key == STEP))}
    lifted = {p for p in (extra.step, extra.elapsed_s, extra.time) if p and "/" in p}
    for target, aliases, read in ((ELAPSED_S, _first(extra.elapsed_s, ELAPSED_ALIASES), seconds),
                                  (TIME, _first(extra.time, TIME_ALIASES), unix_time)):
        for alias in aliases:
            value = read(obj[alias]) if alias in obj else None
            if value is not None:
                renamed[alias] = (target, value)
                break
    data: dict = {}
    dropped: list[str] = []
    for key, value in obj.items():
        if key in lifted and key not in renamed:
            continue  # a lifted copy no alias took: the original stays where it was
        if key in renamed:
            name, read_value = renamed[key]
            data[name] = read_value
        elif key in (ELAPSED_S, TIME):  # v1's clock keys holding text that is no time
            dropped.append(key)
        elif not isinstance(value, dict):  # _flat's rule for one key, without its walk
            if _kept(key, value) and key not in data:
                data[key] = value
            else:
                dropped.append(key)
        else:
            for name, number in _flat({key: value}, dropped):
                if name in data:  # {"a/b": 1, "a": {"b": 2}}: the first is kept
                    dropped.append(name)
                else:
                    data[name] = number
    for path in lifted & renamed.keys():  # the nested original, flattened above, is it
        data.pop(path, None)
    for key, name in extra.rename.items():
        if key in data and name not in data:
            data[name] = data.pop(key)
    kind, boundary, planned = kind_of(data), None, None
    if kind == TRAIN and _closing(obj, data):
        kind = SUMMARY
    elif kind == SUMMARY:
        boundary = _boundary(data)
    elif kind == TRAIN:
        planned = planned_end(data[STEP], obj.get("total_steps", obj.get("max_steps")))
    return Normalised(kind, data, boundary, tuple(dropped), planned), ""


def _first(mapped: str | None, aliases: tuple[str, ...]) -> tuple[str, ...]:
    return (mapped, *aliases) if mapped else aliases


def _step(value: object, *, exact: bool) -> object:
    """v1's own ``step`` is left for the ingest path to judge (7.0 is refused there); an
    alias's integral float (some loggers write numpy floats) is read as the integer."""
    if not exact and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _flat(obj: dict, dropped: list[str]):
    """(key, value) pairs of numbers, booleans and nulls, nested objects flattened with "/";
    what is not read goes to ``dropped``. Iterative: no recursion limit to hit."""
    stack = [(iter(obj.items()), "", 1)]
    while stack:
        items, prefix, depth = stack[-1]
        entry = next(items, None)
        if entry is None:
            stack.pop()
            continue
        key, value = prefix + entry[0], entry[1]
        if isinstance(value, dict) and depth < MAX_DEPTH:
            stack.append((iter(value.items()), key + "/", depth + 1))
        elif _kept(key, value):
            yield key, value
        else:
            dropped.append(key)


def _kept(key: str, value: object) -> bool:
    """Whether a key that is no object is read: a number, boolean or null (not a progress
    field), or v1's ``buckets`` list."""
    return (key == BUCKETS and isinstance(value, list)) or (_is_value(value)
                                                            and key not in METADATA)


def _is_value(value: object) -> bool:
    return value is None or isinstance(value, (int, float))  # bool is an int


def is_eval_key(key: str) -> bool:
    """``eval_loss``, ``val/acc``, ``test_f1``: a validation or evaluation metric."""
    return _EVAL_KEY.match(key) is not None


def kind_of(data: dict) -> str:
    """The kind of a v1 metrics dict:

    - SUMMARY: Hugging Face's end-of-training entry (``train_runtime``), or a per-epoch
      summary (``epoch`` with both ``train_*`` and ``val_*``/``eval_*`` metrics);
    - EVAL: every metric is a validation one (``eval_*``, ``val_*``, ``eval/``, ``test_``...);
    - TRAIN otherwise (a row with no metric too: it still says when the step happened).
    """
    metrics = [k for k in data if k not in SPECIAL]
    if any(k in SUMMARY_KEYS for k in metrics):
        return SUMMARY
    evals = sum(map(is_eval_key, metrics))
    if metrics and evals == len(metrics):
        return EVAL
    if evals and EPOCH in data and any(_TRAIN_KEY.match(k) for k in metrics):
        return SUMMARY
    return TRAIN


def planned_end(step: object, total: object) -> dict | None:
    """The summary row ``{"step": N, "planned_steps": M}`` of a training line at step N of a
    planned total M (LLaMA-Factory's ``total_steps``, the Trainer's ``max_steps``, a text log's
    ``N/M``) once N reaches M: the log's end of training, so ``run_status`` says completed
    (issue 19: runs of other trainers end; one killed at 344 of 500 stays running, then idle).
    None before the total, or with no total."""
    if type(step) is int and type(total) is int and 0 < total <= step:
        return {STEP: step, "planned_steps": total}
    return None


def planned_record(records: list[Record], total: object) -> Record | None:
    """The summary Record of a file read whose last row is a training step at its planned
    total ``total`` with no end-of-training row after it (a checkpoint's trainer_state.json
    at max_steps, a file cut after its last step), or None."""
    last = next((r for r in reversed(records) if r.kind != EVENT), None)
    end = planned_end(last.data.get(STEP), total) if last and last.kind == TRAIN else None
    return Record(last.offset, SUMMARY, end) if end else None


def _closing(obj: dict, data: dict) -> bool:
    """LLaMA-Factory's last line: at ``total_steps``, without a loss (it repeats the last
    step; as a training row it would read as a resume)."""
    total = obj.get("total_steps", obj.get("max_steps"))
    step = data[STEP]
    return (_is_number(total) and _is_number(step) and step >= total
            and not any("loss" in k.lower() for k in data if k not in SPECIAL))


def _boundary(data: dict) -> dict | None:
    """A per-epoch summary for epoch E at step S: epoch E + 1 starts after S (v1's
    ``epoch_start``). None for the end of training or a fractional epoch."""
    epoch = data.get(EPOCH)
    if not _is_number(epoch) or not _integral(epoch) or any(
            k in SUMMARY_KEYS for k in data):
        return None
    event = {EVENT_KEY: "epoch_start", STEP: data[STEP], EPOCH: int(epoch) + 1}
    event.update((k, data[k]) for k in (ELAPSED_S, TIME) if k in data)
    return event


def _integral(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()  # float() of a huge int overflows


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def seconds(value: object) -> float | int | None:
    """A duration: a number of seconds (kept as it is), ``"1:02:03"``, ``"2 days, 1:02:03"``
    (Python's ``str(timedelta)``, which LLaMA-Factory writes) or ``"12.5"``; None otherwise."""
    if _is_number(value):
        return value
    if not isinstance(value, str):
        return None
    match = _CLOCK.fullmatch(value.strip())
    if match:
        days, hours, minutes, secs = match.groups()
        return (int(days or 0) * 24 + int(hours)) * 3600 + int(minutes) * 60 + float(secs)
    return _finite(value)


def unix_time(value: object) -> float | int | None:
    """A point in time as Unix seconds: a number (one past 1e11 is taken as ms, past 1e14 as
    µs, past 1e17 as ns), or ISO 8601 text (``2024-05-01T12:00:00Z``; with no offset it is
    local time, as ``datetime.now().isoformat()`` writes it); None otherwise."""
    if isinstance(value, str):
        number = _finite(value)
        if number is None:
            try:
                return datetime.fromisoformat(value.strip()).timestamp()
            except (ValueError, OverflowError, OSError):
                return None
        value = number
    if not _is_number(value):
        return None
    for limit, per_second in _SCALES:
        if abs(value) > limit:
            try:
                return value / per_second
            except OverflowError:  # an integer of hundreds of digits is no time
                return None
    return value


def _finite(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
