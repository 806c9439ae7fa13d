"""Files read whole whenever they change: our ``run.json``, and Hugging Face's
``trainer_state.json``, which the Trainer rewrites whole at every save. Neither is followed by
offset (tail.py's identity checks would call every rewrite a replaced file). Of the state file
only the entries after those stored are read (formats/hf_state.py): ``FileState.lines`` counts
them and ``FileState.tail`` holds where they end (an ``hf_state.Resume``), so a rewrite with 3
more entries reads and stores exactly those 3, however long the file::

    read(store, state, new, handle, settings)   # -> (True, 3): nothing left unread, 3 rows

A state file that is not whole JSON (a save in progress, or one cut by a crash) is said once
in ``ingest_errors`` and read again when it changes. One that is longer than a window is
stored a window of entries to a transaction, and counts as read (its size and time are
committed) only with the last.
"""

from __future__ import annotations

import copy
import os

from . import careful, saves
from .filestate import FileState
from .formats import csvlog, hf_state
from .openfile import LogHandle
from .parse import MAX_EVENT_DEPTH, Parsed, Problem, decode, depth
from .store import Batch, Store

KINDS = frozenset({"run_meta", "hf_state", "csv"})
CSV_MAX = 256 << 20  # Lightning's metrics.csv: ~100 bytes a row
STATE_MAX = 256 << 20  # a trainer_state.json is ~250 bytes per log_history entry
INCOMPLETE = "trainer_state.json: {why}; read again when it changes"


def read(db_store: Store, state: FileState, new: FileState, handle: LogHandle,
         settings) -> tuple[bool, int]:
    """Read the file if it changed; returns (nothing left unread, rows stored)."""
    info = handle.info
    if (state.state, info.st_size, info.st_mtime) == ("ok", state.size, state.mtime):
        return True, 0
    new.size = new.offset = info.st_size
    if state.kind == "run_meta":
        _run_meta(db_store, state, new, handle, settings.run_json_max_bytes)
        return True, 0
    if state.kind == "csv":
        return True, _csv(db_store, state, new, handle)
    return True, _trainer_state(db_store, state, new, handle)


def _run_meta(db_store: Store, state: FileState, new: FileState, handle: LogHandle,
              cap: int) -> None:
    raw = handle.read(0, cap + 1)  # never more, whatever st_size says
    try:
        if len(raw) > cap:
            raise ValueError(f"it is over {cap} bytes; raise --run-json-max-bytes to read it")
        meta, _ = decode(raw)  # however deep or odd: a ValueError says what is wrong
        if not isinstance(meta, dict):
            raise ValueError("run.json must hold a JSON object")
        if depth(meta) > MAX_EVENT_DEPTH:  # it is stored as JSON text, written recursively
            raise ValueError(f"it nests more than {MAX_EVENT_DEPTH} levels deep")
    except ValueError as exc:  # UnicodeDecodeError is one
        problem = Problem(0, "error", f"run.json is not usable: {exc}", "")
        db_store.record(state, new, problem)
        return
    db_store.commit(state, Batch(Parsed(), new, meta=meta))


def _csv(db_store: Store, state: FileState, new: FileState, handle: LogHandle) -> int:
    """Lightning's metrics.csv, rewritten whole when a key appears: the rows after those
    stored (``FileState.lines`` counts them); fewer rows than stored is a new file, read
    again from its start as a new attempt."""
    size = handle.info.st_size
    if size > CSV_MAX:
        problem = Problem(0, "error", f"metrics.csv is over {CSV_MAX >> 20} MiB; not read")
        db_store.record(state, new, problem)
        return 0
    data = handle.read(0, size)
    records, problems, rows = csvlog.parse(data, state.lines)
    reason = None
    if rows < state.lines:
        records, problems, rows = csvlog.parse(data, 0)
        reason, new.last_step = "file_replaced", None
    new.lines = rows
    parsed = careful.from_records(records, problems, first=state.lines == 0 or bool(reason))
    return db_store.commit(state, Batch(parsed, new, reason))


def _trainer_state(db_store: Store, state: FileState, new: FileState,
                   handle: LogHandle) -> int:
    size = handle.info.st_size
    if size > STATE_MAX:
        problem = Problem(0, "error", f"trainer_state.json is over {STATE_MAX >> 20} MiB; not "
                          "read (point cliffwatch at the Trainer's logging_dir instead)")
        db_store.record(state, new, problem)
        return 0
    resume = hf_state.Resume.of(state.tail)
    rows, first = 0, True
    for part in hf_state.read(handle.read, size, state.lines, resume,
                              folders_from=saves.folders_from(handle.real)):
        if part.status == hf_state.INCOMPLETE:
            _incomplete(db_store, state, new, handle, part)
            return rows
        if part.status == hf_state.INVALID:  # no log_history: not a Trainer's state
            new.state = "skipped"
            notes = [Problem(p.offset, "info", f"not read: {p.reason}") for p in part.problems]
            db_store.record(state, new, *notes)
            return rows
        rows += _store(db_store, state, new, part, first)
        new, first = _after(state, new), False
    return rows


def _store(db_store: Store, state: FileState, new: FileState, part: hf_state.StateRead,
           first: bool) -> int:
    """One window of entries in one transaction, with where the next read starts."""
    step = copy.copy(new)
    step.lines, step.tail = part.entries, part.resume.text() if part.resume else None
    reason = None
    if part.status == hf_state.REWRITTEN:  # a new run, or resumed from an older checkpoint
        reason, step.last_step = "file_replaced", None
    if part.done:
        step.partial_reported = None  # whole again: a later cut file is said again
    else:  # not whole yet: after a crash here, the next start reads on from this window
        step.size, step.offset, step.mtime = state.size, state.offset, state.mtime
    parsed = careful.from_records(part.records, part.problems,
                                  first=first and (state.lines == 0 or reason is not None))
    return db_store.commit(state, Batch(parsed, step, reason))


def _after(state: FileState, new: FileState) -> FileState:
    """The next window's position: the committed state, with the file's size and time."""
    after = copy.copy(state)
    after.size, after.offset, after.mtime, after.inode = new.size, new.offset, new.mtime, new.inode
    return after


def _incomplete(db_store: Store, state: FileState, new: FileState, handle: LogHandle,
                part: hf_state.StateRead) -> None:
    """Say once (until the file is read whole again) that it is not whole JSON, unless it
    is growing as we look (a save under way: its next change reads it)."""
    new.lines, new.tail = state.lines, state.tail
    problems = []
    if part.reason and state.partial_reported is None and not _growing(handle):
        problems.append(Problem(part.offset, "warning", INCOMPLETE.format(why=part.reason)))
        new.partial_reported = part.offset
    db_store.record(state, new, *problems)


def _growing(handle: LogHandle) -> bool:
    now = os.fstat(handle.fd)
    return (now.st_size, now.st_mtime_ns) != (handle.info.st_size, handle.info.st_mtime_ns)
