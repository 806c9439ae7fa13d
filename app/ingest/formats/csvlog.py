"""PyTorch Lightning's ``CSVLogger`` ``metrics.csv``: a sparse wide table, one column per
logged key, rewritten whole when a new key appears (so it is read whole, like
``trainer_state.json``: wholefile.py). For example::

    lr-Adam,step,train_loss,epoch,val_Class_Accuracy
    1.6e-05,49,,,
    ,49,45.94,0,
    ,1239,,0,34.2

gives ``train {"step": 49, "lr-Adam": 1.6e-05, "train_loss": 45.94, "epoch": 0}`` (the rows of
one step and kind that follow each other are one row: Lightning writes the learning-rate
monitor's values apart from the loss, and two training rows at one step would read as a
resume) and ``eval {"step": 1239, "epoch": 0, "val_Class_Accuracy": 34.2}``. An empty cell is
no value; a row's kind is keys.py's (``val_*``/``test_*`` only: ``eval``). A row with no step
cell, or one that is no number, is an ``error`` at its offset.
"""

from __future__ import annotations

import csv

from ...keys import STEP
from ..parse import excerpt
from . import Problem, Record
from .keymap import KeyMap
from .keys import STEP_ALIASES, normalise

NAMES = ("metrics.csv",)  # Lightning's name (lightning_logs/version_N/metrics.csv)
MAX_FIELDS = 10_000


def header(head: bytes) -> list[str] | None:
    """The header's column names, if the first line is complete."""
    end = head.find(b"\n")
    if end < 0:
        return None
    return next(csv.reader([head[:end].decode("utf-8", "replace").strip("\r\ufeff")]), [])


def has_step(columns: list[str], keymap: KeyMap | None = None) -> bool:
    steps = (keymap.step, *STEP_ALIASES) if keymap and keymap.step else STEP_ALIASES
    return any(c.strip() in steps for c in columns)


def parse(data: bytes, skip: int = 0, keymap: KeyMap | None = None
          ) -> tuple[list[Record], list[Problem], int]:
    """``(records, problems, rows)`` of the whole file's complete lines: the records of rows
    after the first ``skip`` (read before), and how many rows there are."""
    lines = data.split(b"\n")[:-1]
    if not lines:
        return [], [], 0
    columns = header(lines[0] + b"\n") or []
    records: list[Record] = []
    problems: list[Problem] = []
    offset, rows = len(lines[0]) + 1, 0
    for raw in lines[1:]:
        at, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        rows += 1
        if rows <= skip:
            continue
        cells = next(csv.reader([raw.decode("utf-8", "replace").rstrip("\r")]), [])
        record = _record(columns, cells[:MAX_FIELDS], at, raw, keymap, problems)
        if record is None:
            continue
        last = records[-1] if records else None
        if last is not None and last.kind == record.kind \
                and last.data.get(STEP) == record.data.get(STEP):
            for key, value in record.data.items():
                last.data.setdefault(key, value)
            continue
        records.append(record)
    return records, problems, rows


def _record(columns: list[str], cells: list[str], offset: int, raw: bytes,
            keymap: KeyMap | None, problems: list[Problem]) -> Record | None:
    obj: dict = {}
    odd = []
    for name, cell in zip(columns, cells, strict=False):
        cell = cell.strip()
        if not cell or not name:
            continue
        try:
            value = float(cell)
        except ValueError:
            odd.append(name)
            continue
        obj[name] = int(value) if name in STEP_ALIASES and value.is_integer() else value
    result, why = normalise(obj, keymap)
    if result is None:
        problems.append(Problem(offset, "error", f"a row with {why}; skipped", excerpt(raw)))
        return None
    if odd:
        problems.append(Problem(offset, "warning", f"not a number: {', '.join(odd[:10])}; "
                                "not stored", excerpt(raw)))
    if "epoch" in result.data and isinstance(result.data["epoch"], float) \
            and result.data["epoch"].is_integer():
        result.data["epoch"] = int(result.data["epoch"])
    return Record(offset, result.kind, result.data)


def sniff(head: bytes) -> bool | None:
    """Whether the header names a step column; None: no complete header line yet."""
    columns = header(head)
    return None if columns is None else has_step(columns)

