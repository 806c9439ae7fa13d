"""Hugging Face Trainer's ``trainer_state.json``: its ``log_history`` list, one record per
entry::

    {"epoch": 1.0023, "grad_norm": 1.31, "learning_rate": 1.9e-05, "loss": 0.41, "step": 2170}
        -> Record(offset=<the entry's "{">, kind="train", data=<the entry>)
        and, before it, Record(kind="event", data={"event": "epoch_start", "step": 2170,
                                                   "epoch": 1})
    {"epoch": 1.0, "eval_loss": 0.52, "eval_runtime": 31.2, "step": 2165}       -> "eval"
    {"epoch": 4.0, "step": 8660, "train_loss": 0.29, "train_runtime": 20387.7}  -> "summary"

Kinds follow keys.kind_of. The fractional ``epoch`` crossing an integer is the start of an
epoch (v1's ``epoch_start``), except where it reaches ``num_train_epochs``: that is the end.

The Trainer rewrites the file whole at every save, and entries are only ever appended to
``log_history``. So what was read is remembered as the number of entries (``stored``), not
as the last step: a step is no key (an eval entry and the final summary share the step of
a training entry), and a count takes exactly the entries after it. ``last_step`` (the step
of entry ``stored - 1``) checks that the history is still the one read; if it is not, or it
is shorter (a new run, or one resumed from an older checkpoint), every entry is returned
with ``status="rewritten"``, to be read as a new attempt. A file that is not whole JSON (cut
mid-rewrite) gives ``status="incomplete"``: try again later.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from ...keys import EPOCH, STEP
from ..parse import excerpt
from . import EVENT, SUMMARY, Problem, Record
from .keys import normalise

HISTORY = "log_history"
OK, INCOMPLETE, REWRITTEN, INVALID = "ok", "incomplete", "rewritten", "invalid"
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()  # the stdlib's: it reads the NaN a NaN loss is written as


@dataclass
class StateRead:
    status: str  # OK, INCOMPLETE (try again later), REWRITTEN (all entries: a new attempt),
    #              or INVALID (no log_history list: not a Trainer state)
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    entries: int = 0  # log_history entries in the file: the next call's ``stored``
    last_step: object = None  # the last entry's step: the next call's ``last_step``


def parse(data: bytes, stored: int = 0, last_step: object = None) -> StateRead:
    """The entries after the first ``stored`` ones of the whole file ``data``."""
    try:
        top, entries = _walk(data.decode("utf-8"))
    except (ValueError, IndexError):  # UnicodeDecodeError is a ValueError
        return StateRead(INCOMPLETE)
    if entries is None:
        return StateRead(INVALID, problems=[Problem(0, "error", f"no '{HISTORY}' list: not a "
                                                    "Hugging Face trainer state; skipped",
                                                    excerpt(data))])
    status, start = OK, stored
    if len(entries) < stored or (stored and last_step is not None
                                 and _step_of(entries[stored - 1][1]) != last_step):
        status, start = REWRITTEN, 0
    offsets = _byte_offsets(data, [offset for offset, _ in entries])
    out = StateRead(status, entries=len(entries),
                    last_step=_step_of(entries[-1][1]) if entries else None)
    epochs = top.get("num_train_epochs")
    previous = _epoch_before(entries, start)
    for i in range(start, len(entries)):
        entry, offset = entries[i][1], offsets[i]
        result, reason = normalise(entry) if isinstance(entry, dict) else (None, "not an object")
        if result is None:
            out.problems.append(Problem(offset, "error", f"{HISTORY} entry: {reason}; skipped",
                                        excerpt(data[offset:offset + 200])))
            continue
        epoch = entry.get(EPOCH)
        if _crossed(previous, epoch, epochs) and result.kind != SUMMARY:
            out.records.append(Record(offset, EVENT, {"event": "epoch_start",
                                                      STEP: result.data[STEP],
                                                      EPOCH: math.floor(epoch)}))
        previous = epoch if _number(epoch) else previous
        out.records.append(Record(offset, result.kind, result.data))
    return out


def _crossed(previous: object, epoch: object, epochs: object) -> bool:
    if not (_number(previous) and _number(epoch)):
        return False
    if _number(epochs) and epoch >= epochs:
        return False  # the last epoch ended: no epoch starts here
    return math.floor(epoch) > math.floor(previous)


def _epoch_before(entries: list, start: int) -> object:
    for _, entry in reversed(entries[:start]):
        if isinstance(entry, dict) and _number(entry.get(EPOCH)):
            return entry[EPOCH]
    return None


def _step_of(entry: object) -> object:
    return entry.get(STEP) if isinstance(entry, dict) else None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def _walk(text: str) -> tuple[dict, list[tuple[int, object]] | None]:
    """The top-level members but ``log_history``, and ``(character offset, entry)`` for each
    of its entries (None: no such list). Raises ValueError or IndexError unless ``text`` is
    one whole JSON object."""
    top: dict = {}
    entries = None
    pos = _skip(text, _expect(text, _skip(text, 0), "{"))
    while text[pos] != "}":
        key, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, _expect(text, _skip(text, pos), ":"))
        if key == HISTORY and text[pos] == "[":
            entries, pos = _array(text, pos)
        else:
            top[key], pos = _DECODER.raw_decode(text, pos)
        pos = _next(text, pos, "}")
    if text[_skip(text, pos + 1):]:
        raise ValueError("text after the object")
    return top, entries


def _array(text: str, pos: int) -> tuple[list[tuple[int, object]], int]:
    items = []
    pos = _skip(text, pos + 1)
    while text[pos] != "]":
        start = pos
        value, pos = _DECODER.raw_decode(text, pos)
        items.append((start, value))
        pos = _next(text, pos, "]")
    return items, pos + 1


def _next(text: str, pos: int, close: str) -> int:
    """Past the ``,`` after a member, or at the closing bracket."""
    pos = _skip(text, pos)
    if text[pos] == ",":
        pos = _skip(text, pos + 1)
        if text[pos] == close:
            raise ValueError(f"',' before {close!r} at {pos}")
        return pos
    return _expect(text, pos, close) - 1


def _skip(text: str, pos: int) -> int:
    return _SPACE.match(text, pos).end()


def _expect(text: str, pos: int, char: str) -> int:
    if text[pos] != char:
        raise ValueError(f"expected {char!r} at {pos}")
    return pos + 1


def _byte_offsets(data: bytes, offsets: list[int]) -> list[int]:
    """Character offsets in the decoded text as byte offsets in ``data``."""
    if data.isascii():  # json.dumps' default (ensure_ascii): the usual case
        return offsets
    text, out, char, byte = data.decode("utf-8"), [], 0, 0
    for offset in offsets:
        byte += len(text[char:offset].encode("utf-8"))
        char = offset
        out.append(byte)
    return out
