"""The careful path: complete JSONL lines, decoded one by one, into rows, events and recorded
problems with their byte offsets (the fast path for clean chunks is bulk.py). For example the
line ``{"step": 7, "loss": "abc"}`` at offset 812 becomes a row with ``loss`` NULL and::

    Problem(offset=812, severity="warning",
            reason="metric 'loss' is not a number (\"abc\"); stored as NULL", excerpt=...)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import orjson
import pyarrow as pa

MAX_LINE = 1024 * 1024
BOM = b"\xef\xbb\xbf"
EXCERPT = 200
SPECIAL = {"step": pa.int64(), "elapsed_s": pa.float64(), "time": pa.float64(),
           "epoch": pa.float64(), "buckets": pa.list_(pa.int32())}
# Keys that would collide with the monitor's own columns get a prefix (docs/log-format.md).
RESERVED = {"run", "attempt", "file_id", "ingested_at", "rank", "rowid", "line_id", ""}
INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)


@dataclass
class Problem:
    offset: int
    severity: str  # "error": the line was not ingested; "warning": kept, but something was odd
    reason: str
    excerpt: str = ""


@dataclass
class Parsed:
    rows: pa.Table | None = None  # metric rows in line order
    events: list[tuple[int, dict]] = field(default_factory=list)  # (byte offset, object)
    problems: list[Problem] = field(default_factory=list)
    crlf: bool = False  # a line ended in \r\n


def excerpt(raw: bytes) -> str:
    return raw[:EXCERPT].decode("utf-8", errors="replace").replace("\x00", "\\0")


def column_name(key: str) -> str:
    return f"log_{key}" if key.lower() in RESERVED else key


def _within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def decode(raw: bytes) -> object:
    """One JSON value; NaN/Infinity literals (Python's json writes them) are accepted."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        # orjson rejects NaN/Infinity and lone surrogates; the stdlib accepts what Python wrote.
        return json.loads(raw.decode("utf-8"))


# ---- careful path -----------------------------------------------------------------------


def parse_lines(data: bytes, base: int, *, events_only: bool = False) -> Parsed:
    """Line by line. ``data`` holds complete lines (ends with \\n); ``base`` is its offset."""
    out = Parsed()
    rows: list[dict] = []
    pos = 0
    for raw in data.split(b"\n")[:-1]:
        offset, pos = base + pos, pos + len(raw) + 1
        if raw.endswith(b"\r"):
            out.crlf, raw = True, raw[:-1]
        if offset == 0 and raw.startswith(BOM):
            out.problems.append(Problem(0, "warning", "UTF-8 byte order mark at start of file; "
                                        "ignored", excerpt(raw)))
            raw = raw[len(BOM):]
        obj = _decode_line(raw, offset, out.problems)
        if obj is None:
            continue
        if "event" in obj or events_only:
            out.events.append((offset, obj))
            continue
        row = _metric_row(obj, offset, raw, out.problems)
        if row is not None:
            rows.append(row)
    out.rows = rows_table(rows) if rows else None
    return out


def _decode_line(raw: bytes, offset: int, problems: list[Problem]) -> dict | None:
    def bad(reason: str) -> None:
        problems.append(Problem(offset, "error", reason, excerpt(raw)))

    if not raw.strip():
        return bad("blank line")
    if len(raw) > MAX_LINE:
        return bad(f"line is {len(raw)} bytes, over the 1 MiB limit")
    try:
        obj = decode(raw)
    except UnicodeDecodeError:
        return bad("not UTF-8 text (binary data?)")
    except ValueError as exc:
        return bad(f"invalid JSON: {exc}")
    if not isinstance(obj, dict):
        return bad(f"not a JSON object (got {type(obj).__name__})")
    return obj


def _metric_row(obj: dict, offset: int, raw: bytes, problems: list[Problem]) -> dict | None:
    step = obj.get("step")
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool) or not _within(step, INT64):
        reason = "missing 'step'" if "step" not in obj else f"'step' is not an integer ({step!r})"
        problems.append(Problem(offset, "error", reason, excerpt(raw)))
        return None
    row, odd, seen = {"step": step}, [], {"step"}
    for key, value in obj.items():
        if key == "step":
            continue
        if key.lower() in seen:  # SQL columns ignore case: Loss and loss are one column
            odd.append(f"key '{key}' repeats another key but for case; ignored")
            continue
        seen.add(key.lower())
        if key == "buckets":
            ok = isinstance(value, list) and all(type(b) is int and _within(b, INT32)
                                                 for b in value)
            row[key] = value if ok else None
            if not ok and value is not None:
                odd.append(f"'buckets' is not a list of integers ({_short(value)}); stored as "
                           "NULL")
        elif value is None or isinstance(value, (int, float)):
            row[column_name(key)] = float(value) if isinstance(value, bool) else value
        else:
            odd.append(f"metric '{key}' is not a number ({_short(value)}); stored as NULL")
    if odd:
        problems.append(Problem(offset, "warning", "; ".join(odd), excerpt(raw)))
    return row


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def records_table(records: list[dict], schema: pa.Schema) -> pa.Table:
    """Arrow table from dicts without ``Table.from_pylist``, which imports pandas (0.3 s, a
    latency spike on the first line ingested)."""
    return pa.table({f.name: pa.array([r.get(f.name) for r in records], f.type) for f in schema},
                    schema=schema)


def rows_table(rows: list[dict]) -> pa.Table:
    """Arrow table in line order: special keys typed, every other key float64. A key spelled
    with other case on other lines goes to the column of its first spelling."""
    spelling: dict[str, str] = {}
    for row in rows:
        for key in list(row):
            first = spelling.setdefault(key.lower(), key)
            if first != key:
                row[first] = row.pop(key)
    schema = pa.schema([(k, SPECIAL.get(k, pa.float64())) for k in spelling.values()])
    return records_table(rows, schema)


def number(value: object) -> float | None:
    """A JSON number as float (NaN and inf included), anything else as None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
