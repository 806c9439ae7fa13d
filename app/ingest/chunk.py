"""A clean chunk: complete lines the fast path (fast.py) may hand to DuckDB's own JSON reader.

Decoding JSON line by line in Python runs at about a fifth of ``read_json``'s speed, so lines
that look clean are given to DuckDB from a scratch copy. A log read from its start is copied
whole by the kernel (``sendfile``) from the descriptor openfile.py checked, never re-opened by
its name: a FIFO or a link renamed over the log after that check would block DuckDB's open for
ever or read another file. Clean means: no CR, no string value, no ``true``/``false`` (DuckDB
would store 1.0 without a word, where the careful path records a warning), and exactly one
integer ``step`` per line, strictly rising. Every key must be its own column name
(columns.py): other keys take the careful path, which maps them.

The byte checks of a whole log run in a thread beside DuckDB's read and leave the step order
to a query after the insert; a chunk read into memory is checked before, steps included, by
a regex pass (an order guard inside the INSERT made DuckDB read single-threaded at half
speed). ``whole_file`` and ``prepare`` return a ``Chunk``, or a short reason why the lines
are not clean enough to try (fast.py reports it).
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..lazy import LazyModule
from .columns import column_name, fold
from .openfile import LogHandle

np = LazyModule("numpy")  # only a chunk's step check needs it, not a log read whole

_SCANNER = ThreadPoolExecutor(1, thread_name_prefix="cliffwatch-scan")
STEP = re.compile(rb'"step":[ \t]*(-?\d{1,18})[ \t]*[,}]')
MIN_BYTES = 256 * 1024  # below this the careful path is cheaper than a scratch file
WHOLE_MAX = 512 << 20  # a bigger log is read in chunks (its copy would take that much memory)
BLOCK = 1 << 18  # translate() holds the GIL a whole block: big ones stalled the ALTERs
# BOOLEAN is not here: DuckDB would store true as 1.0 silently (the careful path notes it).
NUMERIC = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
           "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE"}
RENAMED = re.compile(r"(.*)_\d+")  # how read_json names a second spelling of a key


@dataclass
class Scan:
    """What a look at the raw bytes found: line count, whether they are clean, and (when
    ``steps``) the first and last step, strictly rising in between. A log read whole leaves
    the steps to a cheap SQL check after the insert (queries/ingest/check_rising.sql)."""

    steps: bool = True
    lines: int = 0
    clean: bool = True
    first_step: int | None = None
    last_step: int | None = None
    tail: bytes = b""  # the last byte of the previous block's shape

    def add_block(self, block: bytes) -> None:
        """Fold in any bytes (counts add up across blocks)."""
        shape = _shape(block)
        if b"\r" in shape or _not_number(shape) or _not_number(self.tail + shape[:1]):
            self.clean = False
        self.tail = shape[-1:] or self.tail
        self.lines += shape.count(b"\n")

    def add(self, part: bytes) -> None:
        """Fold in a run of complete lines, steps included."""
        shape = _shape(part)
        lines = shape.count(b"\n")
        if not self.clean or b"\r" in shape or _not_number(shape):
            self.clean = False
            return
        steps = np.array(STEP.findall(part), dtype=np.int64)
        if len(steps) != lines:
            self.clean = False
            return
        rising = bool(np.all(np.diff(steps) > 0))
        if not rising or (self.last_step is not None and lines and steps[0] <= self.last_step):
            self.clean = False
            return
        if lines:
            self.first_step = steps[0] if self.first_step is None else self.first_step
            self.last_step = int(steps[-1])
        self.lines += lines


# The bytes the checks need, kept in one pass (``bytes.translate`` deletes the rest, which is
# ~4/5 of a log): line ends, CR, colons, commas, and quotes, t and f all kept as one byte (t).
_SHAPE_BYTES = b'\n\r:,"tf'
_NOT_SHAPE = bytes(b for b in range(256) if b not in _SHAPE_BYTES)
_AS_T = bytes.maketrans(b'"f', b"tt")


def _shape(part: bytes) -> bytes:
    return part.translate(_AS_T, _NOT_SHAPE)


def _not_number(shape: bytes) -> bool:
    """A value that is no number: after a colon, the next kept byte of a number, ``null`` or
    ``NaN`` is the comma before the next key or the line end; of a string it is its quote,
    of ``true``/``false`` its t or f, of a nested object its first key's quote: all kept as t.
    DuckDB would quietly store "0.5" as 0.5 and true as 1.0, where the careful path records a
    warning. (A key holding a colon, or ``Infinity``, is sent back too: only slower.) An
    earlier check counted quotes against colons for the whole file: the colon of a key
    ``"a:b"`` paid for the quotes of a ``"0.5"`` elsewhere, and DuckDB stored 0.5 silently."""
    return b":t" in shape


@dataclass
class Chunk:
    path: Path  # scratch copy of the lines (in our own private folder)
    first_step: int  # from the first line: it settles the attempt before the scan is done
    # None: a whole log, scanned from ``start`` on, while DuckDB reads it. Not sooner: the
    # scanner holds the GIL, and each return from DuckDB waits for it (the ALTERs ahead of the
    # rows took 0.17 s of a 1M-line catch-up with it running)
    scan: Scan | Future | None
    whole: bool = False  # a whole log: its line count and order are checked after the insert
    first: dict | None = None  # the first line's object (its keys may name every column)
    # a hard link to the log itself (not a copy): DuckDB reads the file as it is at that time,
    # so the insert is kept only if it still holds ``size`` bytes afterwards (``grew``)
    source_fd: int | None = None
    size: int = 0  # a whole log's bytes: what is scanned, and what ``grew`` compares

    def start(self) -> None:
        """Begin the scan of a whole log: our own link or copy of it, ``size`` bytes (nothing
        for a chunk checked already)."""
        if self.scan is None:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            self.scan = _SCANNER.submit(_scan_file, fd, self.size)

    def result(self) -> Scan:
        self.start()
        return self.scan.result() if isinstance(self.scan, Future) else self.scan

    def grew(self) -> bool:
        """A linked log that no longer holds exactly the bytes scanned: DuckDB may have read
        lines past ``size`` (the line count sends those back; a copy of ``size`` bytes can't)."""
        return self.source_fd is not None and os.fstat(self.source_fd).st_size != self.size

    def close(self) -> None:
        if isinstance(self.scan, Future):
            self.scan.result()  # the scanner may still read the copy
        self.path.unlink(missing_ok=True)


def first_line(line: bytes) -> dict | None:
    """The first line's object, if it is a plain metrics line (an integer step, no event)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    step = obj.get("step") if isinstance(obj, dict) else None
    return obj if type(step) is int and "event" not in obj else None


# metric_rows' own columns (queries/migrations/0001_initial.sql)
OWN_COLUMNS = frozenset({"attempt", "step", "file_id"})


def first_line_columns(first: dict, known: dict[str, str]) -> list[str] | None:
    """The keys of a metrics chunk as its first line names them (all but step), when the
    insert can be trusted to refuse any other key of DuckDB's schema sample: the table has no
    column but these keys' and its own (``known``, folded: a fresh database's first log), every
    key is a number and its own column name, and none ends like a second spelling DuckDB
    renames (``loss_1``). A key that only the sample holds then has no column (or clashes with
    attempt or file_id, or is renamed ``Loss_1`` beside loss): the insert raises a
    BinderException before it reads a row, and the chunk is described after all (fast.py).
    None: describe it first. Saves the DESCRIBE, ~45 ms of a catch-up."""
    folded = {fold(key) for key in first}
    if len(folded) != len(first) or not set(known) <= folded | OWN_COLUMNS:
        return None
    names = [key for key in first if key != "step"]
    for name in names:
        if type(first[name]) not in (int, float) or column_name(name) != name \
                or RENAMED.fullmatch(name):
            return None
    return names


def whole_file(handle: LogHandle, size: int, scratch: Path,
               links: Path | None = None) -> Chunk | str:
    """A log read from its start, when it ends with a newline: its first ``size`` bytes
    copied by the kernel from the checked descriptor (catch-up after a restart reads logs
    whole). Logs over ``WHOLE_MAX`` are read in chunks instead (the copy lives in memory)."""
    if not MIN_BYTES <= size <= WHOLE_MAX:
        return "too small for a scratch copy" if size < MIN_BYTES else "read in chunks"
    if handle.read(size - 1, 1) != b"\n":
        return "ends in an unfinished line"
    first = handle.read(0, 1 << 20)
    head = first_line(first[:first.find(b"\n")])
    if head is None:
        return "the first line is no plain metrics line"
    first_step = head["step"]
    linked = _link(handle, links) if links is not None else None
    if linked is not None:
        return Chunk(linked, first_step, None, whole=True, first=head, source_fd=handle.fd,
                     size=size)
    try:
        name, copied = _scratch_copy(scratch, lambda fd: _copy(handle.fd, fd, size))
    except OSError as exc:  # scratch space full (Docker's /dev/shm is 64 MB)
        return f"no scratch space ({exc.strerror or exc})"
    chunk = Chunk(Path(name), first_step, None, whole=True, first=head, size=size)
    if copied != size:
        chunk.close()
        return "truncated while copied"
    return chunk


def _link(handle: LogHandle, links: Path) -> Path | None:
    """A new name in our private folder ``links`` for the file the checked descriptor holds,
    or None (another filesystem, a file we may not link (fs.protected_hardlinks), no /proc):
    then the caller copies. ``/proc/self/fd/N`` followed by ``linkat`` is the open file itself,
    whatever its name now leads to, so a FIFO or link renamed over the log cannot be read.
    (DuckDB 2.0 resolves a symlink before checking its allowed folders: it refuses one.)"""
    name = links / f"{secrets.token_hex(8)}.jsonl"
    try:
        folder = os.open(links, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:  # with a dir_fd, os.link calls linkat(AT_SYMLINK_FOLLOW); plain link(2) would
            # try to link the /proc entry itself
            os.link(f"/proc/self/fd/{handle.fd}", name.name, dst_dir_fd=folder)
        finally:
            os.close(folder)
        info = os.stat(name, follow_symlinks=False)
    except OSError:
        return None
    if (info.st_dev, info.st_ino) != (handle.info.st_dev, handle.info.st_ino):
        name.unlink(missing_ok=True)  # not the checked file (a /proc that is not procfs)
        return None
    return name


def _scratch_copy(scratch: Path, write) -> tuple[str, int]:
    """A new scratch file filled by ``write(fd)``; removed again if writing fails."""
    fd, name = tempfile.mkstemp(dir=scratch, suffix=".jsonl")
    try:
        written = write(fd)
    except BaseException:
        os.unlink(name)
        raise
    finally:
        os.close(fd)
    return name, written


def _copy(source: int, target: int, size: int) -> int:
    copied = 0
    while copied < size:
        sent = os.sendfile(target, source, copied, size - copied)
        if sent == 0:
            break
        copied += sent
    return copied


def _scan_file(fd: int, size: int) -> Scan:
    """Scan the first ``size`` bytes of ``fd`` (our link or copy of the checked file, closed
    here). Counts are additive, so blocks need no cutting at line ends."""
    scan, done = Scan(steps=False), 0
    try:
        while done < size and scan.clean and (data := os.pread(fd, min(BLOCK, size - done),
                                                                  done)):
            done += len(data)
            scan.add_block(data)
    finally:
        os.close(fd)
    scan.clean = scan.clean and done == size
    return scan


def prepare(data: bytes, scratch: Path) -> Chunk | str:
    """A scratch copy of ``data`` (complete lines) if it is clean enough to try the fast path."""
    if len(data) < MIN_BYTES:
        return "too small for a scratch copy"
    head = first_line(data[:data.find(b"\n")])
    if head is None:
        return "the first line is no plain metrics line"
    first_step = head["step"]
    scan = Scan()
    scan.add(data)
    if not scan.clean:
        return "not clean (a string, boolean or CR, or steps that do not rise)"
    try:
        name, _ = _scratch_copy(scratch, lambda fd: _write_all(fd, data))
    except OSError as exc:  # scratch space full: the careful path needs none
        return f"no scratch space ({exc.strerror or exc})"
    return Chunk(Path(name), first_step, scan, first=head)


def _write_all(fd: int, data: bytes) -> int:
    view, done = memoryview(data), 0
    while done < len(data):
        done += os.write(fd, view[done:])
    return done


def new_columns(described: list[tuple], known: set[str],
                skip: frozenset[str] = frozenset()) -> list[str] | None:
    """Keys of a chunk that need a column (``known``: the table's columns, folded; ``skip``:
    keys the insert leaves out), or None if the fast path cannot store the chunk as the
    careful path would: a key that is not numeric, a key that is not its own column name
    (columns.py), or two keys DuckDB took for one (its reader renames the second
    ``Loss``/``loss`` to ``loss_1``)."""
    names, seen = [], set()
    for name, kind, *_ in described:
        if name in skip:
            continue
        list_of_ints = name == "buckets" and kind.endswith("[]") and kind[:-2] in NUMERIC
        if name != "step" and kind not in NUMERIC and not list_of_ints:
            return None
        if column_name(name) != name or fold(name) in seen:
            return None
        seen.add(fold(name))
        if fold(name) not in known:
            names.append(name)
    for name in seen:
        renamed = RENAMED.fullmatch(name)
        if renamed and renamed.group(1) in seen:
            return None
    return names
