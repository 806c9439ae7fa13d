"""The fast path: a clean segment stored by DuckDB's own JSON reader in one transaction.

One entry, ``store``. It either commits the whole segment (its rows, the attempt it may
start, the file's new position) or writes nothing and says why; the tailer then gives the
same segment to the careful path (careful.py), which reads it line by line and records each
problem it finds. Both paths store the same rows (tests/app/test_ingest_both_paths.py)::

    outcome = fast.store(store, segment, scratch)
    outcome.rows      # 30000, committed
    outcome.refused   # or "not clean (a string, boolean or CR, ...)": nothing written

What makes lines clean enough to try is chunk.py's question. Inside the transaction the
INSERT itself fails on anything else it cannot vouch for (a key outside its schema sample, a
value it cannot convert, a line over 1 MiB, a non-integer step: queries/ingest/insert_direct.sql).
It leaves out a row holding an infinity (DuckDB reads ``1e400`` as Infinity silently, where the
careful path notes it), so the rows written fall short of the lines and the segment goes
back; and a log read whole must have rising steps (queries/ingest/check_rising.sql).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from . import attempts
from . import chunk as clean
from .columns import fold
from .filestate import FileState
from .segment import Segment
from .store import UNBOUND, Refused, Store, smaller
from .writing import TABLES

# A rank line's own "rank" is left out by insert_direct_ranks.sql: the file names the rank.
SKIPPED = {"metrics": frozenset(), "rank": frozenset({"rank"})}


@dataclass
class Outcome:
    rows: int = 0  # rows committed
    refused: str | None = None  # why nothing was written: the careful path reads the segment


def store(db_store: Store, segment: Segment, scratch: Path,
          links: Path | None = None) -> Outcome:
    """Commit ``segment`` through DuckDB's reader, or write nothing and say why. ``links``: a
    private folder where a whole log is hard-linked for DuckDB instead of copied (``ingest
    --once`` only: a process that runs no ad-hoc SQL)."""
    state = segment.state
    if state.kind not in SKIPPED:
        return Outcome(refused=f"{state.kind} files take the careful path")
    if segment.reason:
        return Outcome(refused="the file was read again from its start: the careful path "
                               "records why")
    chunk = (clean.whole_file(segment.handle, segment.size, scratch, links)
             if segment.data is None else clean.prepare(segment.data, scratch))
    if isinstance(chunk, str):
        return Outcome(refused=chunk)
    try:
        outcome = _commit(db_store, segment, chunk)
        grew = outcome.refused is not None and chunk.grew()
    finally:
        chunk.close()
    if grew:  # written to while DuckDB read the link: a copy of the scanned bytes holds still
        return store(db_store, segment, scratch)
    return outcome


def _commit(db_store: Store, segment: Segment, chunk: clean.Chunk) -> Outcome:
    """A chunk whose first line can name its columns is inserted without a DESCRIBE; if
    DuckDB's sample holds another key, the insert does not bind, and the chunk is described
    and tried again."""
    doubles = _first_line_columns(db_store, segment.state.kind, chunk)
    if doubles is not None:
        outcome = _transaction(db_store, segment, chunk, doubles)
        if outcome is not UNBOUND:
            return outcome
    doubles = _columns_for(db_store, segment.state.kind, chunk)
    if isinstance(doubles, str):
        return Outcome(refused=doubles)
    outcome = _transaction(db_store, segment, chunk, doubles)
    return Outcome(refused="a key DuckDB's sample holds has no column") \
        if outcome is UNBOUND else outcome


def _transaction(db_store: Store, segment: Segment, chunk: clean.Chunk, doubles: list[str]):
    """The insert in one transaction (store.py's): an Outcome, or UNBOUND when it did not
    bind. What goes to the careful path is store.smaller's rule, the batch's too; a COMMIT
    that raised is raised as Uncertain: the bytes never go to the careful path at once (it
    would store them twice)."""
    state, new = segment.state, segment.after()
    try:
        rows = db_store.transaction(
            lambda cur: (_insert(db_store, state, new, chunk, doubles), [(state, new)]),
            [state.path])
    except duckdb.BinderException:
        return UNBOUND
    except Exception as exc:
        if not smaller(exc):
            raise
        return Outcome(refused=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return Outcome(rows)


def _insert(db_store: Store, state: FileState, new: FileState, chunk: clean.Chunk,
            doubles: list[str]) -> int:
    """The rows, the attempt their first step may start, and the file's new position."""
    db = db_store.db
    if not attempts.takes(chunk.first_step, new):
        raise Refused("its first step does not rise from the file's last (the careful path "
                       "tells a resume from a repeated line)")
    starts = attempts.first(chunk.first_step, new, None)
    params = {"path": str(chunk.path), "attempt": new.attempt, "file_id": state.file_id,
              "names": doubles}
    query = "ingest/insert_direct"
    if state.kind == "rank":
        query = "ingest/insert_direct_ranks"
        params |= {"run": state.run, "rank": state.rank}
    chunk.start()
    written = db.run(query, params).fetchall()[0][0]
    scan = chunk.result()  # a whole log's scan ran beside DuckDB's read
    if not scan.clean:
        raise Refused("not clean (a string, boolean or CR)")
    if written != scan.lines:
        raise Refused(f"DuckDB stored {written} rows of {scan.lines} lines (a blank line, or "
                       "a value beyond a double, left out)")
    first, last, backs = scan.first_step, scan.last_step, 0
    if not scan.steps:  # a log read whole: its order is checked here, after the insert
        backs, first, last = _rising(db, state, new)
    if backs or first != chunk.first_step:
        raise Refused("a step does not rise (a resume inside the file)")
    new.last_step = int(last)
    if chunk.whole:
        new.lines = new.lines + scan.lines  # counted while DuckDB read the file
    if state.kind == "metrics":
        for start in starts:  # one at most: the steps rise after the first
            db.run("ingest/insert_attempt", dict(start, run=state.run, file_id=state.file_id))
    db.run("ingest/run_touch", {"run": state.run})
    db_store.update_files([new])
    return scan.lines


def _rising(db, state: FileState, new: FileState) -> tuple[int, int, int]:
    """(step-backs, first step, last step) of the rows just inserted, in the file's order:
    one streaming pass, or a sort by rowid where the pass did not see them in that order."""
    params = {"file_id": state.file_id, "attempt": new.attempt}
    table = {"table": TABLES[state.kind]}
    backs, first, last, _, out_of_order = db.run("ingest/check_rising", params,
                                                 identifiers=table).fetchall()[0]
    if out_of_order:
        backs, first, last, _ = db.run("ingest/check_rising_sorted", params,
                                       identifiers=table).fetchall()[0]
    return backs, first, last


def _first_line_columns(db_store: Store, kind: str, chunk: clean.Chunk) -> list[str] | None:
    """Add columns for the keys of a metrics chunk's first line, when they may stand for
    DuckDB's whole schema sample (chunk.first_line_columns); returns them, or None."""
    if kind != "metrics" or chunk.first is None:
        return None
    table = TABLES[kind]
    try:
        known = db_store.columns.known(table)
    except duckdb.Error:
        return None
    names = clean.first_line_columns(chunk.first, known)
    if names is None:
        return None
    if not db_store.columns.fits(table, names):
        return None
    db_store.columns.add(table, [name for name in names if fold(name) not in known])
    return names


def _columns_for(db_store: Store, kind: str, chunk: clean.Chunk) -> list[str] | str:
    """Add columns for the chunk's new keys, committed before its rows (an empty column is
    harmless if the rows then take the careful path); returns the chunk's DOUBLE columns, or
    why the fast path cannot store the chunk as the careful path would: a key that is not its
    own column name (columns.py), more keys than ``max_columns`` allows, or a chunk DuckDB
    cannot even describe. Every chunk is described: a key spelled like an existing column in
    other case must be seen. The DOUBLE keys come in the chunk's own spelling, as the INSERT's
    infinity filter sees them."""
    table, skip = TABLES[kind], SKIPPED[kind]
    try:
        known = db_store.columns.known(table)
        described = db_store.db.run("ingest/chunk_columns",
                                    {"path": str(chunk.path)}).fetchall()
    except duckdb.Error as exc:
        return f"DuckDB cannot describe the lines ({type(exc).__name__})"
    names = clean.new_columns(described, known, skip)
    if names is None:
        return "a key needs mapping to its column, or a value is no number"
    if not db_store.columns.fits(table, names):
        return "more keys than --max-metric-columns leaves room for"
    db_store.columns.add(table, names)
    return [d[0] for d in described if d[0] not in skip | {"step", "buckets"}]
