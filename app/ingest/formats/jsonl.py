"""A JSONL file from any trainer: complete lines, decoded one by one and normalised
(keys.py). ``parse(b'{"iter": 5, "train": {"loss": 2.5}}\\n', base=0)`` gives::

    ([Record(offset=0, kind="train", data={"step": 5, "train/loss": 2.5})], [])

A line that is not a JSON object is an ``error`` problem (as on the careful path). Lines with
no step-like key and keys that are not read (strings, lists, progress fields) are not errors:
each call says so in one ``info`` problem apiece, which a caller keeps once per file.
"""

from __future__ import annotations

from ..parse import BOM, MAX_LINE, decode, excerpt
from . import EVENT, SUMMARY, Problem, Record
from .keymap import KeyMap
from .keys import normalise


def parse(data: bytes, base: int, keymap: KeyMap | None = None
          ) -> tuple[list[Record], list[Problem]]:
    """Records of the complete lines in ``data`` (a trailing piece with no ``\\n`` is left
    for later); ``base`` is the file offset of ``data``."""
    records: list[Record] = []
    problems: list[Problem] = []
    no_step: list[int] = []
    dropped: dict[str, None] = {}
    pos = 0
    for raw in data.split(b"\n")[:-1]:
        offset, pos = base + pos, pos + len(raw) + 1
        raw = raw.removesuffix(b"\r")
        if offset == 0:
            raw = raw.removeprefix(BOM)
        obj = _object(raw, offset, problems)
        if obj is None:
            continue
        result, _ = normalise(obj, keymap)
        if result is None:
            no_step.append(offset)
            continue
        dropped.update(dict.fromkeys(result.dropped))
        records.append(Record(offset, result.kind, result.data))
        if result.boundary is not None:
            records.append(Record(offset, EVENT, result.boundary))
        if result.planned is not None:  # the line at its planned total: training ended
            records.append(Record(offset, SUMMARY, result.planned))
    if no_step:
        problems.append(Problem(no_step[0], "info", f"{len(no_step)} line(s) have no step-like "
                                "key (step, global_step, current_steps, iter, ...); skipped"))
    if dropped:
        problems.append(Problem(base, "info", "keys not read (text, lists, progress fields): "
                                + ", ".join(list(dropped)[:10])))
    return records, problems


def _object(raw: bytes, offset: int, problems: list[Problem]) -> dict | None:
    reason = None
    if not raw.strip():
        reason = "blank line"
    elif len(raw) > MAX_LINE:
        reason = f"line is {len(raw)} bytes, over the 1 MiB limit"
    else:
        try:
            obj, _ = decode(raw)
        except ValueError as exc:  # UnicodeDecodeError is one
            reason = f"invalid JSON: {(str(exc).splitlines() or [''])[0][:200]}"
        else:
            if isinstance(obj, dict):
                return obj
            reason = f"not a JSON object (got {type(obj).__name__})"
    problems.append(Problem(offset, "error", reason, excerpt(raw)))
    return None
