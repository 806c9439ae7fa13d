"""llm.c's ``main.log`` (``llmc/logger.h`` writes three line shapes)::

    s:0 tel:11.0095                              validation loss      -> kind "eval"
    s:0 trl:11.0116 lr:0.000001 norm:14.96       training step        -> kind "train"
    s:19552 eval:0.3054                          HellaSwag accuracy   -> kind "eval"

``s:8715 trl:3.5416 lr:0.000370 norm:4.29`` becomes
``{"step": 8715, "loss": 3.5416, "lr": 0.00037, "grad_norm": 4.29}``: fields are renamed
(``NAMES``) to what the monitor's loss and accuracy globs look for; other ``key:value`` fields
a fork adds (``dt:``, ``tok/s:``) are kept. Lines of any other shape (a config table, a
banner) are skipped without a word. A resumed run appends to the same file, so its step
goes back: the ingest path sees a new attempt, as in any log.
"""

from __future__ import annotations

import re

from ...keys import STEP
from ..parse import excerpt
from . import EVAL, TRAIN, Problem, Record

NAMES = {"trl": "loss", "norm": "grad_norm", "tel": "val_loss", "eval": "eval_accuracy",
         "tok/s": "tok_per_sec"}
EVAL_FIELDS = frozenset({"tel", "eval"})
_LINE = re.compile(rb"s:(\d+)((?:[ \t]+[^\s:]+:\S+)+)[ \t]*")
_SNIFF = re.compile(rb"s:\d+ (?:trl|tel|eval):")
SNIFF_LINES = 20
STEP_DIGITS = 20  # more digits than any 64-bit step has (ingest refuses those past it)


def parse(data: bytes, base: int) -> tuple[list[Record], list[Problem]]:
    """Records of the complete lines in ``data`` (``base``: its file offset); a trailing
    piece with no ``\\n`` is left for later."""
    records: list[Record] = []
    problems: list[Problem] = []
    pos = 0
    for raw in data.split(b"\n")[:-1]:
        offset, pos = base + pos, pos + len(raw) + 1
        match = _LINE.fullmatch(raw.removesuffix(b"\r"))
        if match is None:
            continue  # not a log line
        digits = match.group(1)
        if len(digits) > STEP_DIGITS:  # int() refuses past 4,300 digits; none fits anyway
            problems.append(Problem(offset, "error", f"'s:' is not a step within 64 bits "
                                    f"({len(digits)} digits); line skipped", excerpt(raw)))
            continue
        data, kind, odd = row(int(digits), match.group(2).split())
        if odd:
            problems.append(Problem(offset, "warning", f"not a number: {', '.join(odd)}; "
                                    "stored as NULL", excerpt(raw)))
        records.append(Record(offset, kind, data))
    return records, problems


def row(step: int, pairs: list[bytes]) -> tuple[dict, str, list[str]]:
    row: dict = {STEP: step}
    fields, odd = [], []
    for pair in pairs:
        field, text = pair.decode("utf-8", "replace").split(":", 1)
        name = NAMES.get(field, field)
        if name in row:
            continue  # the same field twice on a line: the first is kept
        fields.append(field)
        try:
            row[name] = float(text)  # C's printf writes nan, -nan, inf: float() reads them
        except ValueError:
            row[name] = None
            odd.append(f"{field}:{text[:20]}")
    kind = EVAL if EVAL_FIELDS.issuperset(fields) else TRAIN
    return row, kind, odd


def sniff(first_bytes: bytes) -> bool:
    """Whether one of the first complete lines is an llm.c log line."""
    lines = first_bytes.split(b"\n")[:-1][:SNIFF_LINES]
    return any(_SNIFF.match(line) for line in lines)
