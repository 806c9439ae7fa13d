"""Turning complete JSONL lines into rows, events and recorded problems.

Two paths produce the same result. The fast path hands a clean chunk to DuckDB's own JSON
reader (about 15x faster than decoding each line in Python). Anything it cannot vouch for -- a
bad line, a key it did not sample, a string where a number belongs, an event line -- sends the
chunk down the careful path, which reads line by line and records every problem with its byte
offset. For example the line ``{"step": 7, "loss": "abc"}`` at offset 812 becomes a row with
``loss`` NULL and the problem::

    Problem(offset=812, severity="warning",
            reason="metric 'loss' is not a number (\"abc\"); stored as NULL", excerpt=...)
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa

from app.db import queries

MAX_LINE = 1024 * 1024
BOM = b"\xef\xbb\xbf"
EXCERPT = 200
FAST_MIN_BYTES = 256 * 1024  # below this the careful path is cheaper than a scratch file
SPECIAL = {"step": pa.int64(), "elapsed_s": pa.float64(), "time": pa.float64(),
           "epoch": pa.float64(), "buckets": pa.list_(pa.int32())}
# Keys that would collide with the monitor's own columns get a prefix (docs/log-format.md).
RESERVED = {"run", "attempt", "file_id", "ingested_at", "rank"}


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
    if not isinstance(step, int) or isinstance(step, bool):
        reason = "missing 'step'" if "step" not in obj else f"'step' is not an integer ({step!r})"
        problems.append(Problem(offset, "error", reason, excerpt(raw)))
        return None
    row, odd = {"step": step}, []
    for key, value in obj.items():
        if key == "step":
            continue
        if key == "buckets":
            ok = isinstance(value, list) and all(type(b) is int for b in value)
            row[key] = value if ok else None
            if not ok and value is not None:
                odd.append(f"'buckets' is not a list of integers ({_short(value)})")
        elif value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            row[column_name(key)] = value
        else:
            odd.append(f"metric '{key}' is not a number ({_short(value)})")
    if odd:
        problems.append(Problem(offset, "warning", "; ".join(odd) + "; stored as NULL",
                                excerpt(raw)))
    return row


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def rows_table(rows: list[dict]) -> pa.Table:
    """Arrow table in line order: special keys typed, every other key float64."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    schema = pa.schema([(k, SPECIAL.get(k, pa.float64())) for k in keys])
    return pa.Table.from_pylist(rows, schema=schema)


# ---- fast path ----------------------------------------------------------------------------


def parse_fast(cursor: duckdb.DuckDBPyConnection, data: bytes, scratch: Path) -> Parsed | None:
    """DuckDB's JSON reader on a clean chunk, or None when the careful path must decide."""
    if len(data) < FAST_MIN_BYTES or b"\r" in data or b"\n\n" in data or data[:1] == b"\n":
        return None
    fd, tmp = tempfile.mkstemp(dir=scratch, suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        query = queries.load("ingest/read_chunk")
        table = cursor.sql(query.text(), params={"path": tmp}).to_arrow_table()
    except duckdb.Error:
        return None
    finally:
        os.unlink(tmp)
    if table.num_rows != data.count(b"\n"):
        return None
    table = _normalise(table)
    return Parsed(rows=table) if table is not None else None


def _normalise(table: pa.Table) -> pa.Table | None:
    """Cast to the careful path's types; None if a column is not what the format allows."""
    columns, names = [], []
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if name == "step":
            if not pa.types.is_integer(kind) or column.null_count:
                return None
            column = column.cast(pa.int64())
        elif name == "buckets":
            if not (pa.types.is_list(kind) and pa.types.is_integer(kind.value_type)):
                return None
            column = column.cast(pa.list_(pa.int32()))
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind):
            column = column.cast(pa.float64())
        else:
            return None  # strings, booleans, objects, the "event" key: the careful path decides
        columns.append(column)
        names.append(name if name in SPECIAL else column_name(name))
    if "step" not in names:
        return None
    return pa.table(columns, names=names)


def number(value: object) -> float | None:
    """A JSON number as float (NaN and inf included), anything else as None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
