"""The careful path: a segment decoded line by line in Python (parse.py), stored in one
transaction, with every oddity recorded against its line's byte offset.

Everything the fast path (fast.py) declines comes here, and so does everything it was never
offered (events, a file read again from its start, small appends). ``parsed`` is the one
reading of a file's lines, whoever stores them: the batch, the line-by-line backstop and the
lines a rotated file gets late (tail.py)::

    rows = careful.store(store, segment)   # 812 rows; a bad line is an ingest_errors row

If the database refuses a batch for what it holds (a value no check foresaw), the backstop
stores each line in its own transaction, so one bad line never stops a file; any other
failure (out of memory, I/O) raises with the offset unmoved and the tailer retries.
"""

from __future__ import annotations

import copy
import json
import logging

import orjson

from ..lazy import LazyModule
from .backoff import describe
from .filestate import FileState
from .formats import EVENT, TRAIN, Record, jsonl, system, textlog
from .formats.keymap import KeyMap
from .parse import (
    EXCERPT,
    MAX_EVENT_DEPTH,
    Parsed,
    Problem,
    depth,
    excerpt,
    first_line,
    metric_row,
    parse_lines,
    rows_table,
)
from .segment import Segment
from .store import Batch, Store, content_error

pa = LazyModule("pyarrow")

log = logging.getLogger("cliffwatch.ingest")


def store(db_store: Store, segment: Segment) -> int:
    """Store the segment's lines in one transaction; returns rows stored."""
    new = segment.after()
    parsed = parse(segment.state.kind, segment.data, segment.start.offset, new, segment.reason,
                   db_store.keymap(segment.state.run))
    try:
        return db_store.commit(segment.state, Batch(parsed, new, segment.reason))
    except Exception as exc:
        if not content_error(exc):
            raise  # says nothing about the lines: keep the offset, retry later
    log.warning("%s: a batch could not be stored; storing it line by line", segment.state.path)
    return line_by_line(db_store, segment)


def store_late(db_store: Store, state: FileState, old: FileState,
               data: bytes) -> tuple[int, str | None]:
    """Lines a rotated file got after the switch (tail.py): numbered after that file's last
    line (``old``), stored with the tracked file's row unchanged. Returns (rows, None), or
    (0, why) when the database refuses them for their content (they are not read)."""
    parsed = parse(state.kind, data, old.offset, old, None, db_store.keymap(state.run))
    try:
        return db_store.commit(state, Batch(parsed, copy.copy(state), rotated=old)), None
    except Exception as exc:
        if not content_error(exc):
            raise
        return 0, describe(exc)


def line_by_line(db_store: Store, segment: Segment) -> int:
    """The backstop for a line the database refuses for what it holds: each line in its own
    transaction, read by ``parse`` as in a batch, and one refused for its content is recorded
    and skipped. Any other failure stops here, with the lines before it committed, and is
    retried."""
    state, rows, offset = segment.state, 0, segment.start.offset
    before, reason = segment.start, segment.reason
    for raw in segment.data.split(b"\n")[:-1]:
        line = Segment(state, before, segment.handle, raw + b"\n", reason)
        new = line.after()
        parsed = parse(state.kind, line.data, offset, new, reason, db_store.keymap(state.run))
        try:
            rows += db_store.commit(state, Batch(parsed, new, reason))
        except Exception as exc:
            if not content_error(exc):
                raise
            problem = Problem(offset, "error", f"could not store this line "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0]}); skipped",
                              excerpt(raw))
            db_store.record(state, new, problem, reason=reason)
        before, reason, offset = copy.copy(state), None, offset + len(line.data)
    return rows


def parse(kind: str, data: bytes, base: int, new: FileState, reason: str | None,
          keymap: KeyMap | None = None) -> Parsed:
    """A file's complete lines (or records) as rows, events and problems: the file kind's
    rules (an event line in a rank file is ignored; another trainer's log is translated by
    its reader in formats/), the reset that made it read again, and its CRLF line ends,
    reported once per file (``new`` remembers it). ``keymap``: the run's extra key mappings
    for JSONL of other trainers (formats/keymap.py)."""
    if kind == system.KIND:  # samples of the machine, for system_samples: no metric rows
        parsed = system.parse(data, base)
    elif kind == "tfevents":
        parsed = _tfevents_columns(data, base)
    elif kind in READERS:
        parsed = from_records(*_read(kind, data, base, keymap, new.last_step), first=base == 0)
    else:
        parsed = parse_lines(data, base, events_only=kind == "events")
    if kind == "rank" and parsed.events:
        parsed.problems += [Problem(o, "warning", "event line in a rank file; ignored",
                                    excerpt(json.dumps(e).encode())) for o, e in parsed.events]
        parsed.events = []
    if reason:
        parsed.problems.insert(0, Problem(0, "warning", f"{reason.replace('_', ' ')}: read "
                                          "again from the start as a new attempt"))
    if parsed.crlf and not new.crlf_reported:
        parsed.problems.append(Problem(base, "warning", "file has CRLF (\\r\\n) line endings; "
                                       "lines are read normally"))
        new.crlf_reported = True
    return parsed


def _jsonl(data: bytes, base: int, keymap: KeyMap | None, after: int | None):
    return jsonl.parse(data, base, keymap)


def _tfevents_columns(data: bytes, base: int) -> Parsed:
    """A TensorBoard file's scalars as columns (columnar.py), or record by record where it
    declines the batch (keys that need metric_row's rules)."""
    from . import columnar
    from .formats import tfevents  # protobuf: only for TensorBoard files

    got = tfevents.read(data, base, final=True)  # the tailer cut the step
    return columnar.parsed(got, first=base == 0) or from_records(
        tfevents.records(got), got.problems, first=base == 0)


# Readers of other trainers' logs: (data, base, keymap, after) -> (records, problems), where
# ``after`` is the file's last training step stored (a text log's printed dicts count their
# steps on from it). Their records are v1 dicts, stored by the same rules as our own lines
# (parse.metric_row). "llmc": text logs tracked before every text log was read.
READERS = {"jsonl": _jsonl, "text": textlog.parse, "llmc": textlog.parse}
LINE_READERS = frozenset({"jsonl", "text", "llmc"})  # a line of theirs can be read alone


def _read(kind: str, data: bytes, base: int, keymap: KeyMap | None, after: int | None):
    """A reader's records, and if it raises (a line its rules did not foresee), each line
    read alone: the one that raises is an error at its offset, the others are stored (the
    promise: no record's content stops a file)."""
    try:
        return READERS[kind](data, base, keymap, after)
    except MemoryError:
        raise  # a resource error says nothing about the lines: retry it later
    except Exception:
        if kind not in LINE_READERS:
            raise
    records, problems, offset = [], [], base
    for raw in data.split(b"\n")[:-1]:
        try:
            more, notes = READERS[kind](raw + b"\n", offset, keymap, after)
        except MemoryError:
            raise
        except Exception as exc:
            more, notes = [], [Problem(offset, "error", f"could not read this line "
                                       f"({type(exc).__name__}: {first_line(exc)}); skipped",
                                       excerpt(raw))]
        records += more
        problems += notes
        offset += len(raw) + 1
        after = next((r.data.get("step") for r in reversed(more) if r.kind == TRAIN), after)
    return records, problems


def from_records(records: list[Record], problems: list[Problem], first: bool = True) -> Parsed:
    """Records of a format reader as a batch: training rows, eval and summary rows kept
    apart, events. ``info`` notes (keys not read, lines with no step) are kept only from a
    file's first batch (``first``), so each is said once per file, not once per read."""
    out = Parsed(problems=[p for p in problems if first or p.severity != "info"])
    rows, evals, kinds = [], [], []
    for record in records:
        try:
            row = _record(record, out)
        except MemoryError:
            raise
        except Exception as exc:  # the promise: no record's content stops a file
            out.problems.append(Problem(record.offset, "error", f"could not read this record "
                                        f"({type(exc).__name__}: {first_line(exc)}); skipped",
                                        excerpt(_raw(record))))
            continue
        if row is None:
            continue
        if record.kind == TRAIN:
            rows.append(row)
            out.row_offsets.append(record.offset)
        else:
            evals.append(row)
            kinds.append(record.kind)
            out.eval_offsets.append(record.offset)
    out.rows = rows_table(rows) if rows else None
    if evals:
        out.evals = rows_table(evals).append_column("kind", pa.array(kinds, pa.string()))
    return out


def _record(record: Record, out: Parsed) -> dict | None:
    """A metric row of the record, or None (an event, or a problem noted in ``out``)."""
    if record.kind != EVENT:
        return metric_row(record.data, record.offset, _raw(record), out.problems, [])
    if depth(record.data) > MAX_EVENT_DEPTH:  # stored as JSON text, written recursively
        out.problems.append(Problem(record.offset, "error", f"event nests more than "
                                    f"{MAX_EVENT_DEPTH} levels deep; not stored",
                                    excerpt(_raw(record))))
    else:
        out.events.append((record.offset, record.data))
    return None


def _raw(record: Record) -> bytes:
    """A record as text for a problem's excerpt, whatever it holds: orjson refuses integers
    past 64 bits and deep nesting (issue 18), the stdlib writes any integer, and a record
    too deep for either is named by its keys."""
    try:
        return orjson.dumps(record.data, option=orjson.OPT_SERIALIZE_NUMPY)[:EXCERPT]
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        pass
    try:
        return json.dumps(record.data, default=repr)[:EXCERPT].encode()
    except (ValueError, TypeError, RecursionError):
        keys = ", ".join(map(repr, list(record.data)[:10])) if isinstance(record.data, dict) \
            else type(record.data).__name__
        return f"{{{keys}: ...}}"[:EXCERPT].encode("utf-8", "backslashreplace")
