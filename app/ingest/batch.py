"""New logs stored many to a transaction: a catch-up of a team's runs folder, where each of
thousands of runs holds one small log.

Stored one by one, each small log paid a transaction, a handful of statements and a Python
decoding of its lines (27 s for 1,000 logs of 1,000 lines, against 1.8 s for one log of
1,000,000). Here the logs a tick finds never read are read into one scratch file, each line
given its file's id as the key ``file_id``, and stored by one ``read_json`` and one
transaction per group (``GROUP_BYTES``), which commits every file's rows with its position::

    rows = batch.store(store, root, [(state, "run1/metrics.jsonl"), ...], scratch)

Only what the fast path (fast.py) would store the same way is taken: a metrics log never
read, ending in a newline, clean bytes (chunk.py), every line an object at its start, a plain
first line whose keys are their own column names. Inside the transaction the insert fails on
anything else it cannot vouch for (queries/ingest/insert_batch.sql), and a file's rows must
match its line count and first step and rise (queries/ingest/check_batch.sql). A group that
fails is rolled back and split in halves; a file that fails alone, or any file left out, is
read by the tailer one by one as before, from offset 0: nothing is written twice.

A key no first line of the group holds: the scratch file's first line names every key of the
group's first lines, so DuckDB's schema sample holds them all, and a key outside its sample
makes the read fail instead of being dropped (measured on DuckDB 2.0: with several files or
an explicit ``columns``, the reader drops an unknown key without a word).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson

from . import attempts
from . import chunk as clean
from .columns import column_name, fold
from .filestate import FileState, grown
from .openfile import Refused as Unopened
from .openfile import open_log
from .segment import Segment
from .store import UNBOUND, Refused, Store, smaller

KEY = "new logs stored together"  # the tailer's Backoff key for this work
KIND = "metrics"  # rank files name their rank in the path: they take the fast path alone
TABLE = "metric_rows"
GROUP_BYTES = 64 << 20  # per read_json: 1,000 x 1,000 lines took 3.9 s in 32 MiB groups,
# 2.9 s in 64 MiB ones; never more than half the scratch space's free room (``room``)
GROUP_FILES = 512
FILE_MAX = 4 << 20  # a bigger log pays its own transaction off (fast.py)
MIN_FILES = 2  # one file alone is read as before (its refusals keep their reasons)
ID = "file_id"  # the key each line gets: a log's own key folding to it is never clean
NAMES_STEP = -(1 << 63)  # the step of the line naming the keys: insert_batch.sql leaves it out


@dataclass
class Ready:
    """A new log read whole and checked, its lines given its id."""

    state: FileState
    new: FileState  # its position after every line, its attempt not begun (kept as read)
    first: dict  # its first line
    lines: int
    data: bytes  # the lines as the scratch file holds them
    stored: FileState | None = None  # ``new`` as the last transaction stored it


def candidates(states) -> list[FileState]:
    """Files the batch may take: metrics logs no transaction has touched yet."""
    return [s for s in states if s.kind == KIND and s.state == "ok" and s.offset == 0
            and s.inode is None and s.attempt == 0]


def store(db_store: Store, root: Path, files: list[tuple[FileState, str]], scratch: Path,
          budget: int = GROUP_BYTES, halt: threading.Event | None = None) -> int:
    """Store the logs that qualify, a group of at most ``budget`` bytes (and GROUP_BYTES) to
    a transaction; returns rows committed. A file not committed is left as it was, for the
    tailer to read alone. If a COMMIT raises (it may still have committed), store.Uncertain
    names its files (the tailer reads their rows back from ``files`` first). Called every
    tick, with or without files (a success ends the tailer's backoff of KEY, and what health
    says of it). ``halt`` set: no further group is begun (the files left are read later)."""
    if len(files) < MIN_FILES:
        return 0
    rows = 0
    # the next group is read and checked (Python, holding the GIL) while DuckDB stores this
    # one (without it)
    with ThreadPoolExecutor(1, thread_name_prefix="cliffwatch-batch") as reader:
        groups = _groups(root, files, min(budget, GROUP_BYTES, room(scratch)))
        ahead = reader.submit(next, groups, None)
        while (group := ahead.result()) is not None:
            if halt is not None and halt.is_set():
                break
            ahead = reader.submit(next, groups, None)
            rows += _store_group(db_store, group, scratch)
    return rows


def room(scratch: Path) -> int:
    """Bytes a group's scratch file may take: half the scratch space's free room (Docker
    gives /dev/shm 64 MB), at least one MiB (a group too big fails and is halved)."""
    try:
        return max(1 << 20, shutil.disk_usage(scratch).free // 2)
    except OSError:
        return GROUP_BYTES // 2


def _groups(root: Path, files: list[tuple[FileState, str]], budget: int):
    """The files that qualify, read, in groups of at most ``budget`` bytes."""
    group, size = [], 0
    for state, rel in files:
        ready = _read(root, state, rel)
        if ready is None:
            continue
        if group and (size + len(ready.data) > budget or len(group) == GROUP_FILES):
            yield group
            group, size = [], 0
        group.append(ready)
        size += len(ready.data)
    if group:
        yield group


def _read(root: Path, state: FileState, rel: str) -> Ready | None:
    """The log read whole from its checked descriptor, if it qualifies (else None)."""
    try:
        handle = open_log(root, rel)
    except (OSError, Unopened):
        return None  # the tailer finds out why, and records it
    with handle:
        size = handle.info.st_size
        if not 0 < size <= FILE_MAX:
            return None
        data = handle.read(0, size)
        if len(data) != size or data[-1:] != b"\n" or data[:1] != b"{":
            return None
        first = clean.first_line(data[:data.find(b"\n")])
        lines = _clean_lines(data) if first is not None and _plain(first) else None
        if lines is None:
            return None
        tagged, objects = _with_id(data, state.file_id)
        if objects != lines:
            return None  # a blank or indented line: the careful path reports it
        new = _position(state, handle, data)
    return Ready(state, new, first, lines, tagged)


def _plain(first: dict) -> bool:
    """A first line whose keys are numbers under their own column names (chunk.py's rule)."""
    for key, value in first.items():
        if key != "step" and (type(value) not in (int, float) or column_name(key) != key
                              or clean.RENAMED.fullmatch(key)):
            return False
    return len({fold(k) for k in first}) == len(first)


def _clean_lines(data: bytes) -> int | None:
    """The line count, if the bytes hold no CR, string, boolean or nested object (chunk.Scan);
    else None."""
    scan = clean.Scan(steps=False)
    for start in range(0, len(data), clean.BLOCK):
        scan.add_block(data[start:start + clean.BLOCK])
        if not scan.clean:
            return None
    return scan.lines


def _position(state: FileState, handle, data: bytes) -> FileState:
    """The file's row after all of ``data``, its first attempt begun (filled in by the
    check: ``last_step``)."""
    start = copy.copy(state)
    start.state, start.inode, start.mtime = "ok", handle.info.st_ino, handle.info.st_mtime
    start.grew_at = grown(state, start.mtime)
    return Segment(state, start, handle, data).after()


def _with_id(data: bytes, file_id: int) -> tuple[bytes, int]:
    """Each line that starts with ``{`` given ``"file_id": id`` as its first key; with the
    number of such lines (the length tells, without another pass over the bytes)."""
    tag = b'{"%s":%d,' % (ID.encode(), file_id)
    tagged = tag + data[1:].replace(b"\n{", b"\n" + tag)
    return tagged, 1 + (len(tagged) - len(tag) - len(data) + 1) // (len(tag) - 1)


def _store_group(db_store: Store, group: list[Ready], scratch: Path) -> int:
    """One group in one transaction; a group that fails is split in halves, down to one
    file (which the tailer then reads alone, and records why): store.smaller's rule, the fast
    path's too (out of memory splits the group, since a smaller one may fit)."""
    if not group:
        return 0
    try:
        return _commit(db_store, group, scratch)
    except Exception as exc:
        if not smaller(exc):
            raise  # an Uncertain COMMIT: the tailer backs off and reads the files back
        if len(group) == 1:
            return 0
        half = len(group) // 2
        return (_store_group(db_store, group[:half], scratch)
                + _store_group(db_store, group[half:], scratch))


def _commit(db_store: Store, group: list[Ready], scratch: Path) -> int:
    """The group in one transaction. Its columns come from its first lines when they may
    stand for DuckDB's whole sample (as fast.py's do), else from a DESCRIBE of the lines."""
    keys = _keys(group)
    if keys is None:
        raise Refused("two spellings of a key")
    path = _scratch_file(scratch, keys, group)
    try:
        doubles = _first_line_columns(db_store, keys)
        rows = UNBOUND if doubles is None else _transaction(db_store, group, path, doubles)
        if rows is UNBOUND:
            rows = _transaction(db_store, group, path, _columns(db_store, path))
        if rows is UNBOUND:
            raise Refused("a key DuckDB's sample holds has no column")
    finally:
        path.unlink(missing_ok=True)
    return rows


def _transaction(db_store: Store, group: list[Ready], path: Path, doubles: list[str]):
    """Rows committed (each file's position with them, by store.transaction), or UNBOUND
    (rolled back) if the insert did not bind."""
    def work(cur):
        rows = _insert(db_store, group, path, doubles)
        return rows, [(ready.state, ready.stored) for ready in group]

    try:
        return db_store.transaction(work, [ready.state.path for ready in group])
    except duckdb.BinderException:
        return UNBOUND


def _keys(group: list[Ready]) -> list[str] | None:
    """Every key of the group's first lines, or None if two files spell one differently."""
    spelled: dict[str, str] = {}
    for ready in group:
        for key in ready.first:
            if spelled.setdefault(fold(key), key) != key:
                return None
    return list(spelled.values())


def _scratch_file(scratch: Path, keys: list[str], group: list[Ready]) -> Path:
    """The group's lines after a first line naming every key (not stored: NAMES_STEP)."""
    fd, name = tempfile.mkstemp(dir=scratch, suffix=".jsonl")
    try:
        names = orjson.dumps({ID: 0} | {k: 0.5 for k in keys} | {"step": NAMES_STEP}) + b"\n"
        _write_all(fd, [names] + [ready.data for ready in group])
    except BaseException:
        os.unlink(name)
        raise
    finally:
        os.close(fd)
    return Path(name)


def _write_all(fd: int, parts: list[bytes]) -> None:
    for part in parts:
        view, done = memoryview(part), 0
        while done < len(part):
            done += os.write(fd, view[done:])


def _first_line_columns(db_store: Store, keys: list[str]) -> list[str] | None:
    """Add columns for the group's first-line keys when the table has no other column (so a
    key of DuckDB's sample that no first line holds has none, and the insert does not bind);
    returns its DOUBLE keys, or None: describe the lines."""
    known = db_store.columns.known(TABLE)
    if not set(known) <= {fold(k) for k in keys} | clean.OWN_COLUMNS:
        return None
    if not db_store.columns.fits(TABLE, keys):
        return None
    db_store.columns.add(TABLE, [k for k in keys if fold(k) not in known])
    return [k for k in keys if k != "step"]


def _columns(db_store: Store, path: Path) -> list[str]:
    """Add columns for the group's new keys (committed ahead, as fast.py does); returns its
    DOUBLE keys in their own spelling."""
    known = db_store.columns.known(TABLE)
    described = db_store.db.run("ingest/chunk_columns", {"path": str(path)}).fetchall()
    names = clean.new_columns(described, known, frozenset({ID}))
    ours = fold(ID)
    if names is None or any((fold(d[0]) == ours and d[0] != ID) or _renamed_from(d[0]) == ours
                            for d in described):
        raise Refused("a key needs mapping to its column, or a value is no number")
    if not db_store.columns.fits(TABLE, names):
        raise Refused("more keys than --max-metric-columns leaves room for")
    db_store.columns.add(TABLE, names)
    return [d[0] for d in described if d[0] not in {ID, "step", "buckets"}]


def _renamed_from(name: str) -> str | None:
    """The folded key DuckDB's reader renamed to ``name`` (``File_ID_1``), if it did."""
    renamed = clean.RENAMED.fullmatch(name)
    return fold(renamed.group(1)) if renamed else None


def _insert(db_store: Store, group: list[Ready], path: Path, doubles: list[str]) -> int:
    """The rows, each file's first attempt and position; raises _Refused if a file's rows
    are not its lines."""
    db = db_store.db
    db.run("ingest/insert_batch", {"path": str(path), "names": doubles}).fetchall()
    ids = [ready.state.file_id for ready in group]
    checked = db.run("ingest/check_batch", {"file_ids": ids, "low": min(ids),
                                            "high": max(ids)}).fetchall()
    found = {row[0]: row[1:] for row in checked}
    starts = []
    for ready in group:
        rows, backs, first, last = found.get(ready.state.file_id, (0, 0, None, None))
        if rows != ready.lines or backs or first != ready.first["step"]:
            raise Refused(f"{ready.state.path}: its rows are not its lines")
        # a copy: a transaction that fails (the group is then split) must leave it as read
        ready.stored = copy.copy(ready.new)
        if not attempts.takes(first, ready.stored):
            raise Refused(f"{ready.state.path}: its first step may start an attempt")
        starts += attempts.first(first, ready.stored, None)
        ready.stored.last_step = int(last)
    db.run("ingest/insert_attempts_batch", {
        "runs": [ready.state.run for ready in group],
        "attempts": [s["attempt"] for s in starts],
        "start_steps": [s["start_step"] for s in starts],
        "reasons": [s["reason"] for s in starts], "file_ids": ids})
    db.run("ingest/runs_touch_batch", {"runs": sorted({ready.state.run for ready in group})})
    db_store.update_files([ready.stored for ready in group])
    return sum(ready.lines for ready in group)
