"""Big TensorBoard files decoded ahead, in a process of their own, while the server imports
(issue 23: start to first chart).

A server's first catch-up of a 1,000,000-event file spent 1.1 s decoding it in a thread that
shared the GIL with Streamlit's imports, and the chart waited for both. On a first start
(no database yet) ``serve`` starts this reader at once; it finds the folder's big event
files and decodes the first two reads of each (one ``chunk`` from offset 0, then one from where
that ends: what the catch-up and the first live tick read) on the other core. When the tailer
then reads those bytes, ``tfevents.read`` asks here first::

    ahead.start(logdir, reads.chunk_of(settings.chunk_bytes))   # serve, before anything else
    got = ahead.take(data, base)   # tfevents.read: the decoded Read, or None
    ahead.finish()                 # the first live tick, or serve's end: the process and files go

An answer is used only for the very bytes it was made of: their length and CRC-32C, which the
child reports of the bytes it read and ``take`` computes of the bytes the tailer read (5 ms
for 64 MB). A file that grew meanwhile, a different first read, a child that failed or was
slow to start: the tailer decodes the bytes itself, as it always did. Later starts (the
database exists) read on from stored offsets and start nothing here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ... import scratch
from ...lazy import LazyModule

np = LazyModule("numpy")

PREFIX = "events.out.tfevents."
MIN_BYTES = 8 * 1024 * 1024  # smaller files decode in under 0.1 s: not worth a process
MOST_FILES = 2  # files decoded ahead: two cores, one of them importing the web stack
ROUNDS = 2  # reads per file: the catch-up's, and the first live tick's (the rest of 64 MB)
MOST_ENTRIES = 20_000  # folder entries looked at before the search gives up (a fleet folder)
WAIT_S = 30.0  # the longest the tailer waits for an answer before decoding itself
_ARRAYS = ("offset", "step", "time", "tag", "value")
_BYTES_PER_BYTE = 2  # the decoded arrays of a read are under twice its size (117 of 64 MB)
PLAN = "plan.json"


class _Ahead:
    def __init__(self, process: subprocess.Popen, folder: Path):
        self.process = process
        self.folder = folder
        self.plan: set[tuple[int, int]] = set()  # (base, length) of the reads it decodes
        self.plan_read = False
        self.planned = False  # the plan was read after the process had exited: it is whole


_RUNNING: _Ahead | None = None


def start(logdir: Path, chunk: int, least: int | None = None) -> None:
    """Start the reader for ``logdir`` (a first start: nothing stored yet): for its event
    files of ``least`` bytes or more."""
    global _RUNNING
    if _RUNNING is not None:
        return
    try:
        folder = scratch.make(_base(chunk))
        command = [sys.executable, "-m", __name__, str(logdir), str(chunk),
                   str(MIN_BYTES if least is None else least), str(folder)]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   cwd=Path(__file__).resolve().parents[3])
    except OSError:  # no room or no process to be had: the tailer decodes as it always did
        return
    _RUNNING = _Ahead(process, folder)


def _base(chunk: int) -> Path:
    """tmpfs when it has room for what is decoded (a container's is often 64 MB), else the
    temporary folder; stale folders a killed server left there are swept (scratch.py)."""
    need = _BYTES_PER_BYTE * chunk * MOST_FILES * ROUNDS
    shm = Path("/dev/shm")
    with contextlib.suppress(OSError):
        if os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > need:
            scratch.sweep(shm)
            return shm
    base = Path(tempfile.gettempdir())
    scratch.sweep(base)
    return base


def finish() -> None:
    """Stop the reader and remove its files (the first reads are over)."""
    global _RUNNING
    running, _RUNNING = _RUNNING, None
    if running is None:
        return
    if running.process.poll() is None:
        running.process.kill()
    running.process.wait()
    shutil.rmtree(running.folder, ignore_errors=True)


def take(data: bytes, base: int):
    """The tfevents.Read of ``data`` (read from ``base``) decoded ahead, or None."""
    running = _RUNNING
    if running is None or (base, len(data)) not in _plan(running, again=base > 0):
        return None
    import google_crc32c

    name = f"{base}-{len(data)}-{google_crc32c.value(data)}.json"
    made = _wait_for(running, running.folder / name)
    if made is None:
        if running.process.poll() is None:  # WAIT_S gone by: stuck (a read that blocks)
            running.process.kill()  # so no later read waits for it again
            running.process.wait()
        return None
    try:
        return _load(made)
    except (OSError, ValueError, KeyError, TypeError):  # not whole: decoded here instead
        return None
    finally:
        for path in running.folder.glob(f"{made.stem}.*"):
            path.unlink(missing_ok=True)


def _plan(running: _Ahead, again: bool) -> set[tuple[int, int]]:
    """The reads the process decodes. Every first read (from offset 0) is in its first plan;
    a later read is planned once it knows where the one before ends: ``again`` reads the
    plan again, until the process has exited (a catch-up of 10,000 small files reads the
    plan once)."""
    if running.planned or (running.plan_read and not again):
        return running.plan
    done = running.process.poll() is not None
    path = _wait_for(running, running.folder / PLAN)
    if path is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            running.plan = {(int(b), int(n)) for b, n in json.loads(path.read_text())}
    running.planned, running.plan_read = done, True
    return running.plan


def _wait_for(running: _Ahead, path: Path) -> Path | None:
    """``path`` once the process wrote it; None once it exited without (or after WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if running.process.poll() is not None or time.monotonic() > deadline:
            return path if path.exists() else None
        time.sleep(0.002)  # sleeping, the GIL is the web stack's
    return path


def _load(made: Path):
    from . import Problem, tfbulk, tfevents

    meta = json.loads(made.read_text())
    stem = made.with_suffix("")
    # mapped copy-on-write: no fresh memory is filled (0.2 s for these 117 MB in a VM),
    # and the file can go at once (its pages stay while the arrays are used)
    arrays = {name: _mapped(Path(f"{stem}.{name}"), meta["dtypes"][name])
              for name in (*_ARRAYS, "groups")}
    if len({len(arrays[name]) for name in _ARRAYS}) != 1 or not (
            len(arrays["groups"]) <= len(arrays["step"])):
        raise ValueError("arrays of different lengths: not one whole answer")
    found = tfbulk.Scalars(*(arrays[name] for name in _ARRAYS), meta["tags"])
    problems = [Problem(*p) for p in meta["problems"]]
    return tfevents.Read(found, arrays["groups"], problems, meta["consumed"])


def _mapped(path: Path, dtype: str):
    if not path.stat().st_size:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype, mode="c")


# the child: python -m app.ingest.formats.ahead LOGDIR CHUNK LEAST FOLDER


def big_files(logdir: Path, least: int) -> list[Path]:
    """The folder's biggest event files of ``least`` bytes or more, MOST_FILES at most."""
    found: list[tuple[int, str]] = []
    seen = 0
    for top, dirs, files in os.walk(logdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        seen += len(dirs) + len(files)
        for name in files:
            if name.startswith(PREFIX):
                try:  # a link (out of the folder, to a device) is left to the tailer's rules
                    info = os.lstat(os.path.join(top, name))
                except OSError:
                    continue
                size = info.st_size
                if stat.S_ISREG(info.st_mode) and size >= least:
                    found.append((size, os.path.join(top, name)))
        if seen > MOST_ENTRIES:
            break
    return [Path(path) for _, path in sorted(found, reverse=True)[:MOST_FILES]]


def _publish(path: Path, text: str) -> None:
    scratch_file = path.with_suffix(".part")
    scratch_file.write_text(text)
    scratch_file.replace(path)  # whole, or not there: the tailer never reads a part


def _decode(path: Path, base: int, chunk: int, folder: Path):
    """Decode one read; returns where it ends and what publishes it (once the file's next
    read is planned: the tailer may ask for that as soon as this one is there)."""
    import google_crc32c

    from . import tfevents

    with path.open("rb") as handle:
        handle.seek(base)
        data = handle.read(chunk)
    got = tfevents.decoded(data, base)
    stem = folder / f"{base}-{len(data)}-{google_crc32c.value(data)}"
    arrays = {name: getattr(got.found, name) for name in _ARRAYS} | {"groups": got.groups}
    for name, values in arrays.items():
        np.ascontiguousarray(values).tofile(f"{stem}.{name}")
    meta = {"dtypes": {name: values.dtype.str for name, values in arrays.items()},
            "tags": list(got.found.tags), "consumed": got.consumed,
            "problems": [[p.offset, p.severity, p.reason, p.excerpt] for p in got.problems]}
    return base + got.consumed, lambda: _publish(stem.with_suffix(".json"), json.dumps(meta))


def main(argv: list[str]) -> int:
    logdir, chunk, least, folder = Path(argv[0]), int(argv[1]), int(argv[2]), Path(argv[3])
    reads = []
    for path in big_files(logdir, least):
        with contextlib.suppress(OSError):
            reads.append((path, 0, path.stat().st_size))
    plan = [[0, min(size, chunk)] for _, _, size in reads]
    _publish(folder / PLAN, json.dumps(plan))
    for _ in range(ROUNDS):
        later = []
        for path, base, size in reads:
            try:
                end, publish = _decode(path, base, chunk, folder)
            except OSError:  # gone, unreadable, a full disk: the tailer decodes it itself
                continue
            if base < end < size:
                later.append((path, end, size))
                plan.append([end, min(size - end, chunk)])
                _publish(folder / PLAN, json.dumps(plan))
            publish()
        reads = later
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
