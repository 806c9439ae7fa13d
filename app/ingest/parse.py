"""The careful path: complete JSONL lines, decoded one by one, into rows, events and recorded
problems with their byte offsets (the fast path for clean chunks is fast.py). For example the
line ``{"step": 7, "loss": "abc"}`` at offset 812 becomes a row with ``loss`` NULL and::

    Problem(offset=812, severity="warning",
            reason="metric 'loss' is not a number (\"abc\"); stored as NULL", excerpt=...)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from ..keys import BUCKETS, EVENT, INT64, STEP, is_step  # noqa: F401 (INT64: store.py)
from ..lazy import LazyModule
from .arrays import from_values
from .columns import SPECIAL, column_name, fold

pa = LazyModule("pyarrow")  # the fast path needs no Arrow: ingest --once may never import it

MAX_LINE = 1024 * 1024
MAX_EVENT_DEPTH = 64  # an event is stored as JSON text; json.dumps recurses once per level
BOM = b"\xef\xbb\xbf"
EXCERPT = 200
INT32 = (-(2**31), 2**31 - 1)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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
    row_offsets: list[int] = field(default_factory=list)  # byte offset of each row's line
    # rows kept apart from the training line (other trainers' validation metrics and
    # summaries): a "kind" column says eval or summary; stored in eval_rows
    evals: pa.Table | None = None
    eval_offsets: list[int] = field(default_factory=list)
    # system.jsonl's samples and their per-GPU values (formats/system.py): system_samples
    # and system_gpus, without their run (the store adds it)
    system: pa.Table | None = None
    gpus: pa.Table | None = None


def excerpt(raw: bytes) -> str:
    return raw[:EXCERPT].decode("utf-8", errors="replace").replace("\x00", "\\0")


def _within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def decode(raw: bytes) -> tuple[object, list[str]]:
    """One JSON value, and notes on what had to be changed to read it. NaN/Infinity literals
    (Python's json writes them) are accepted. Raises ValueError (UnicodeDecodeError included)
    for anything that is not JSON, however deep or odd."""
    try:
        return orjson.loads(raw), []
    except orjson.JSONDecodeError as exc:
        first = exc
    # orjson rejects NaN/Infinity, numbers beyond a double and lone surrogates; the stdlib
    # reads them, and each change it makes to the value is noted.
    notes: list[str] = []
    try:
        obj = json.loads(raw.decode("utf-8"), parse_float=lambda t: _big(t, notes),
                         parse_int=lambda t: _big(t, notes) if len(t) > 20 else int(t))
    except RecursionError:
        raise ValueError(f"nested too deeply ({first})") from None
    if b"\\u" in raw:  # a \uD800-style escape can name a lone surrogate
        obj = without_surrogates(obj, notes)
    return obj, notes


def _big(text: str, notes: list[str]) -> float:
    value = float(text)
    if math.isinf(value):
        notes.append(f"number {text[:20]}{'...' if len(text) > 20 else ''} is beyond the range "
                     f"of a double; stored as {'-' if value < 0 else ''}Infinity")
    return value


def without_surrogates(obj: object, notes: list[str]) -> object:
    """Lone surrogates (no character, and not encodable as UTF-8) as their escape text."""
    def fix(text: str) -> str:
        if not LONE_SURROGATE.search(text):
            return text
        fixed = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        notes.append(f"'{fixed[:40]}' holds a lone surrogate escape, which is no character; "
                     "kept as the escape text")
        return fixed

    if isinstance(obj, str):
        return fix(obj)
    if isinstance(obj, list):
        return [without_surrogates(v, notes) for v in obj]
    if isinstance(obj, dict):
        return {fix(k): without_surrogates(v, notes) for k, v in obj.items()}
    return obj


def event_text(obj: dict) -> str:
    """An event as the JSON text stored in ``events.data``."""
    return json.dumps(obj)


def depth(obj: object) -> int:
    """How deeply lists and objects nest in ``obj`` (iterative: no recursion limit)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, (list, dict)):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict)
                                                  else value))
    return deepest


# ---- careful path -----------------------------------------------------------------------


def complete_lines(data: bytes, base: int, out: Parsed) -> Iterator[tuple[int, bytes]]:
    """(file offset, bytes) of each complete line of ``data`` (``base``: its file offset; a
    trailing piece with no \\n is left for later), without its \\r (``out.crlf`` says one
    was seen) or the UTF-8 byte order mark that starts the file (a warning in
    ``out.problems``)::

        list(complete_lines(b'\\xef\\xbb\\xbf{"step": 1}\\r\\n{"st', 0, out))
        -> [(0, b'{"step": 1}')]   # out.crlf is True, out.problems names the mark
    """
    pos = 0
    for raw in data.split(b"\n")[:-1]:
        offset, pos = base + pos, pos + len(raw) + 1
        if raw.endswith(b"\r"):
            out.crlf, raw = True, raw[:-1]
        if offset == 0 and raw.startswith(BOM):
            out.problems.append(Problem(0, "warning", "UTF-8 byte order mark at start of file; "
                                        "ignored", excerpt(raw)))
            raw = raw[len(BOM):]
        yield offset, raw


def parse_lines(data: bytes, base: int, *, events_only: bool = False) -> Parsed:
    """Line by line. ``data`` holds complete lines (ends with \\n); ``base`` is its offset.
    Never raises for what the bytes hold: a line that cannot be read is a Problem."""
    out = Parsed()
    rows: list[dict] = []
    for offset, raw in complete_lines(data, base, out):
        try:
            row = _line(raw, offset, out, events_only)
        except MemoryError:
            raise  # a resource error says nothing about the line: retry it later
        except Exception as exc:  # the promise: no line's content stops a file
            out.problems.append(Problem(offset, "error", f"could not read this line "
                                        f"({type(exc).__name__}: {first_line(exc)}); skipped",
                                        excerpt(raw)))
            continue
        if row is not None:
            rows.append(row)
            out.row_offsets.append(offset)
    out.rows = rows_table(rows) if rows else None
    return out


def _line(raw: bytes, offset: int, out: Parsed, events_only: bool) -> dict | None:
    """One line: a metric row to keep, or None (an event, or a problem recorded)."""
    decoded = decode_line(raw, offset, out.problems)
    if decoded is None:
        return None
    obj, notes = decoded
    if EVENT in obj or events_only:
        if depth(obj) > MAX_EVENT_DEPTH:
            out.problems.append(Problem(offset, "error", f"event nests more than "
                                        f"{MAX_EVENT_DEPTH} levels deep; not stored",
                                        excerpt(raw)))
            return None
        if notes:
            out.problems.append(Problem(offset, "warning", "; ".join(notes), excerpt(raw)))
        out.events.append((offset, obj))
        return None
    return metric_row(obj, offset, raw, out.problems, notes)


def first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()
    return text[0][:200] if text else ""


def decode_line(raw: bytes, offset: int, problems: list[Problem]):
    """(object, notes) for a line holding a JSON object, else None with the problem noted."""
    def bad(reason: str) -> None:
        problems.append(Problem(offset, "error", reason, excerpt(raw)))

    if not raw.strip():
        return bad("blank line")
    if len(raw) > MAX_LINE:
        return bad(f"line is {len(raw)} bytes, over the 1 MiB limit")
    try:
        obj, notes = decode(raw)
    except UnicodeDecodeError:
        return bad("not UTF-8 text (binary data?)")
    except ValueError as exc:
        return bad(f"invalid JSON: {first_line(exc)}")
    if not isinstance(obj, dict):
        return bad(f"not a JSON object (got {type(obj).__name__})")
    return obj, notes


def metric_row(obj: dict, offset: int, raw: bytes, problems: list[Problem],
                notes: list[str]) -> dict | None:
    step = obj.get(STEP)
    if not is_step(step):  # 7.0 too: the validator (logformat.py) refuses the same lines
        reason = (f"missing '{STEP}'" if STEP not in obj
                  else f"'{STEP}' is not an integer within 64 bits ({_short(step)})")
        problems.append(Problem(offset, "error", reason, excerpt(raw)))
        return None
    row, odd, seen = {STEP: step}, list(notes), {STEP: STEP}  # folded column -> key
    for key, value in obj.items():
        if key == STEP:
            continue
        name = column_name(key)
        if fold(name) in seen:  # one column per name as DuckDB compares them (columns.py)
            first = seen[fold(name)]
            odd.append(f"key {_key(key)} goes to the same column ({_key(column_name(first))}) "
                       f"as the key {_key(first)} before it on this line; ignored")
            continue
        seen[fold(name)] = key
        if name == BUCKETS:
            ok = isinstance(value, list) and all(type(b) is int and _within(b, INT32)
                                                 for b in value)
            row[name] = value if ok else None
            if not ok and value is not None:
                odd.append(f"'{BUCKETS}' is not a list of integers ({_short(value)}); stored as "
                           "NULL")
        else:
            row[name] = _metric_value(key, value, odd)
    if odd:
        problems.append(Problem(offset, "warning", "; ".join(odd), excerpt(raw)))
    return row


def _metric_value(key: str, value: object, odd: list[str]) -> float | None:
    """A metric as float; what is not a number is NULL and noted, a boolean is 0/1 and noted."""
    if value is None:
        return None
    if isinstance(value, bool):
        odd.append(f"metric {_key(key)} is a boolean ({_short(value)}); stored as "
                   f"{float(value)}")
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer (copysign would overflow as float() did)
            odd.append(f"metric {_key(key)} is beyond the range of a double; stored as "
                       f"{'-' if value < 0 else ''}Infinity")
            return math.inf if value > 0 else -math.inf
    odd.append(f"metric {_key(key)} is not a number ({_short(value)}); stored as NULL")
    return None


def _key(key: str) -> str:
    text = json.dumps(key, ensure_ascii=False)[1:-1]
    return f"'{text}'" if len(text) <= 40 else f"'{text[:37]}...'"


def _short(value: object) -> str:
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        text = f"a nested {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def records_table(records: list[dict], schema: pa.Schema) -> pa.Table:
    """Arrow table from dicts without ``Table.from_pylist`` or ``pa.array``, which import
    pandas (0.3 s, a latency spike on the first line ingested: arrays.py)."""
    return pa.table({f.name: from_values([r.get(f.name) for r in records], f.type)
                     for f in schema}, schema=schema)


def rows_table(rows: list[dict]) -> pa.Table:
    """Arrow table in line order: special keys typed, every other key float64. Column names
    that DuckDB takes for one (``fold``) go to the column of their first spelling."""
    spelling: dict[str, str] = {}
    for row in rows:
        for key in list(row):
            first = spelling.setdefault(fold(key), key)
            if first != key:
                row[first] = row.pop(key)
    schema = pa.schema([(k, _arrow_type(SPECIAL.get(k, "float64"))) for k in spelling.values()])
    return records_table(rows, schema)


def _arrow_type(name: str):
    return pa.list_(pa.int32()) if name == "list<int32>" else pa.type_for_alias(name)


def number(value: object) -> float | None:
    """A JSON number as float (NaN and inf included), anything else as None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer past a double (Python's json reads any)
            return math.inf if value > 0 else -math.inf
    return None
