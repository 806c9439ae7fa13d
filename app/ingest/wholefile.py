"""Files read whole whenever they change: our ``run.json``, and Hugging Face's
``trainer_state.json``, which the Trainer rewrites whole at every save. Neither is followed by
offset (tail.py's identity checks would call every rewrite a replaced file); the state file
remembers how many ``log_history`` entries were stored (``FileState.lines``), so a rewrite
with 3 more entries stores exactly those 3::

    read(store, state, new, handle, settings)   # -> True: nothing complete left unread
"""

from __future__ import annotations

import json

from . import careful
from .filestate import FileState
from .formats import hf_state
from .openfile import LogHandle
from .parse import Parsed, Problem
from .store import Batch, Store

KINDS = frozenset({"run_meta", "hf_state"})
STATE_MAX = 256 << 20  # a trainer_state.json is ~250 bytes per log_history entry


def read(db_store: Store, state: FileState, new: FileState, handle: LogHandle,
         settings) -> bool:
    info = handle.info
    if (state.state, info.st_size, info.st_mtime) == ("ok", state.size, state.mtime):
        return True
    new.size = new.offset = info.st_size
    if state.kind == "run_meta":
        _run_meta(db_store, state, new, handle, settings.run_json_max_bytes)
    else:
        _trainer_state(db_store, state, new, handle)
    return True


def _run_meta(db_store: Store, state: FileState, new: FileState, handle: LogHandle,
              cap: int) -> None:
    raw = handle.read(0, cap + 1)  # never more, whatever st_size says
    try:
        if len(raw) > cap:
            raise ValueError(f"it is over {cap} bytes; raise --run-json-max-bytes to read it")
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise ValueError("run.json must hold a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        problem = Problem(0, "error", f"run.json is not usable: {exc}", "")
        db_store.commit(state, Batch(Parsed(problems=[problem]), new))
        return
    db_store.commit(state, Batch(Parsed(), new, meta=meta))


def _trainer_state(db_store: Store, state: FileState, new: FileState,
                   handle: LogHandle) -> None:
    raw = handle.read(0, STATE_MAX + 1)
    if len(raw) > STATE_MAX:
        problem = Problem(0, "error", f"trainer_state.json is over {STATE_MAX >> 20} MiB; not "
                          "read (point cliffwatch at the Trainer's logging_dir instead)")
        db_store.commit(state, Batch(Parsed(problems=[problem]), new))
        return
    # the entry count is the position; a step is no key (eval entries repeat a step)
    result = hf_state.parse(raw, stored=state.lines)
    if result.status == hf_state.INCOMPLETE:  # caught mid-rewrite: read it when it changes
        db_store.commit(state, Batch(Parsed(), new))
        return
    if result.status == hf_state.INVALID:  # no log_history: not a Trainer's state
        new.state = "skipped"
        notes = [Problem(p.offset, "info", f"not read: {p.reason}") for p in result.problems]
        db_store.commit(state, Batch(Parsed(problems=notes), new))
        return
    reason = None
    if result.status == hf_state.REWRITTEN:  # a new run, or resumed from an older checkpoint
        reason, new.last_step = "file_replaced", None
    new.lines = result.entries
    parsed = careful.from_records(result.records, result.problems, first=state.lines == 0)
    db_store.commit(state, Batch(parsed, new, reason))
