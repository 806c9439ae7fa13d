"""Diagnosis's marks in the database (issue 23; migration 0029): how far live diagnosis judged
(the metric line id, event rowid and rank line rowid, every run's) and what each run's
detectors carry, so a restarted server judges what was stored since, not every run again (a
fresh server over 10,000 finished runs spent 25 s on them before its Runs page was whole)::

    diagnosis_marks   version | last_line | last_event | last_rank_line | saved_at
    diagnosis_state   run | state   (zlib'd pickle of {"lines": LiveRun, "ranks": Stragglers})

Both are written in one transaction (``save``), so the marks and the states agree: a run's
state is as of the marks, and the lines, events and rank lines after them are judged again on
restart, as they would have been had the server kept running (an incident found twice is
stored in place). A run's state is read only when it has something new.

The state is the detectors' own objects, pickled: the same objects a running server holds, so
a restarted one continues exactly where it stopped. Two guards make that safe:

- ``version``: a digest of this package's source, ingest/writers.py, the watch settings and
  the numpy, pandas and pyarrow versions. Marks of another version are not read: the server judges
  every run from the start, once, and stores the new version's marks.
- ``loads`` unpickles only the classes listed in ALLOWED (the detectors' and the numpy and
  pandas pieces they hold): a database from elsewhere cannot run code through a pickle. A
  state that names anything else is refused (StateRefused), and diagnosis starts over.
"""

from __future__ import annotations

import functools
import hashlib
import io
import pickle
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..db import queries
from ..ingest.parse import records_table
from .rules import Watch

SAVE_S = 10.0  # the marks are stored at most this often while lines come (and at stop)
SOURCES = (*sorted(Path(__file__).parent.glob("*.py")),
           Path(__file__).parents[1] / "ingest" / "writers.py")
STATE_SCHEMA = pa.schema([("run", pa.string()), ("state", pa.binary())])
ALLOWED = frozenset({  # (module, name) a state may name; anything else is refused
    ("builtins", "slice"), ("collections", "Counter"), ("copyreg", "_reconstructor"),
    ("builtins", "object"), ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("pandas", "DataFrame"), ("pandas", "Series"), ("pandas", "Index"), ("pandas", "RangeIndex"),
    ("pandas", "StringDtype"), ("pandas.arrays", "ArrowStringArray"),
    ("pandas.core.internals.managers", "BlockManager"),
    ("pandas.core.internals.managers", "SingleBlockManager"),
    ("pandas._libs.internals", "_unpickle_block"), ("pandas.core.indexes.base", "_new_Index"),
    ("pyarrow.lib", "_restore_array"), ("pyarrow.lib", "py_buffer"),
    ("pyarrow.lib", "type_for_alias"),
    ("app.diagnose.diagnosis", "LiveRun"),
    ("app.diagnose.detect", "RunDetector"), ("app.diagnose.recent", "RecentLines"),
    ("app.diagnose.yardstick", "SpikeYardstick"), ("app.diagnose.episodes", "Episodes"),
    ("app.diagnose.stalls", "Stalls"), ("app.diagnose.rules", "Incident"),
    ("app.diagnose.rules", "Watch"), ("app.diagnose.frozen", "FrozenDetector"),
    ("app.diagnose.frozen", "Repeat"), ("app.diagnose.causes", "BucketRuns"),
    ("app.diagnose.schedule", "Schedule"), ("app.diagnose.straggler", "Stragglers"),
    ("app.diagnose.straggler", "Rank"), ("app.ingest.writers", "Writers"),
    ("app.ingest.writers", "Track"),
})


class StateRefused(Exception):
    """A stored state that cannot be restored: diagnosis judges every run from the start."""


def version(watch: Watch) -> str:
    """What the stored state depends on: this code, the watch settings, numpy, pandas, pyarrow."""
    digest = hashlib.sha256(_code().encode())
    for part in (*watch.loss, "|", *watch.accuracy):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:32]


@functools.cache
def _code() -> str:
    """The code's part, read once per process (its files do not change under it)."""
    digest = hashlib.sha256()
    for path in SOURCES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for part in (np.__version__, pd.__version__, pa.__version__):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def load(cursor, watch: Watch) -> tuple[int, int, int] | None:
    """(last line id, last event rowid, last rank line rowid) judged by this version, or None."""
    rows = queries.execute(cursor, "diagnose/marks", {"version": version(watch)}).fetchall()
    return tuple(rows[0]) if rows else None


def save(db, watch: Watch, marks: tuple[int, int, int], states: dict[str, dict]) -> None:
    """The marks and these runs' states, in one transaction."""
    rows = [{"run": run, "state": dumps(state)} for run, state in states.items()]
    cursor = db.cursor()
    cursor.begin()
    try:
        if rows:
            cursor.register("chunk", records_table(rows, STATE_SCHEMA))
            try:
                queries.execute(cursor, "diagnose/state_save")
            finally:
                cursor.unregister("chunk")
        line, event, rank = marks
        queries.execute(cursor, "diagnose/marks_save", {
            "version": version(watch), "line": line, "event": event, "rank": rank})
        cursor.commit()
    except BaseException:
        db.rollback(cursor)
        raise


def restore(cursor, runs: list[str]) -> dict[str, dict]:
    """The stored states of these runs (those without one are left out)."""
    rows = queries.execute(cursor, "diagnose/state_of", {"runs": runs}).fetchall()
    return {run: loads(blob) for run, blob in rows}


def dumps(state: dict) -> bytes:
    return zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)


def loads(blob: bytes) -> dict:
    try:
        return _Unpickler(io.BytesIO(zlib.decompress(blob))).load()
    except StateRefused:
        raise
    except Exception as exc:  # a damaged or foreign state: judged again, never half-read
        raise StateRefused(f"{type(exc).__name__}: {exc}") from exc


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED:
            raise StateRefused(f"a stored diagnosis state names {module}.{name}, which it may "
                               "not")
        return super().find_class(module, name)
