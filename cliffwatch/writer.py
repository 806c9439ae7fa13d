"""Line files that never stall a training loop: each line is written whole, at once.

A line is one ``os.write`` on a file opened with ``O_APPEND``: no buffer of ours holds it, so
a monitor tailing the file sees it at once and a crash (even SIGKILL) loses at most the line
being written. Only a burst (a line less than ``BURST_S`` after the previous one, far faster
than any training loop logs) is kept in memory and written by a flusher thread within
``FLUSH_S``, so that 200,000 ``log()`` calls a second do not pay a write and a JSON encoding
each (bench/logapi.py); ``close`` writes what is left. A failed write (a full disk) or a
deleted file is said once on stderr and training goes on; lines that could not be written are
counted and the count is said when the file can be written again::

    cliffwatch: cannot write runs/demo/metrics.jsonl ([Errno 28] No space left on device);
    training goes on, its lines are dropped until it can be written again
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

CHECK_S = 1.0  # how often a file is checked for having been deleted (one fstat)
BURST_S = 0.001  # a line this soon after the previous one waits for the flusher
FLUSH_S = 0.1  # the flusher's period: a burst's line is in the file within this
_encode = json.JSONEncoder(default=str).encode  # NaN/Infinity written as the format asks
FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class Problems:
    """Says each problem once on stderr (a loop logging 1,000 lines/s must not say it 1,000
    times); ``said`` keeps what was said, for tests and for ``finish``."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self._keys: set[str] = set()
        self._lock = threading.RLock()  # a SIGTERM handler may log while it is held

    def say(self, key: str, text: str) -> None:
        with self._lock:
            if key in self._keys:
                return
            self._keys.add(key)
            self.said.append(text)
        with contextlib.suppress(OSError, ValueError):  # stderr closed: nothing else to tell
            print(f"cliffwatch: {text}", file=sys.stderr, flush=True)

    def forget(self, key: str) -> None:
        """The problem is over: say it again if it comes back."""
        with self._lock:
            self._keys.discard(key)


class LineFile:
    """One append-only JSONL file of JSON objects; ``add`` is safe across threads and never
    raises."""

    def __init__(self, path: Path, problems: Problems) -> None:
        self.path, self.problems = path, problems
        self._lock = threading.RLock()  # a SIGTERM handler may log while it is held
        self._fd: int | None = None
        self._burst: list[dict] = []  # lines waiting for the flusher, in order
        self._last = 0.0  # monotonic time of the previous line
        self._flusher: threading.Thread | None = None
        self._closed = threading.Event()
        self._dropped = 0  # lines lost since the last good write
        self._torn = False  # a partial line is in the file: the next write starts a new line
        self._next_check = time.monotonic() + CHECK_S
        self._open()

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, FLAGS, 0o644)
        except OSError as exc:
            self._fd = None
            self.problems.say(f"open {self.path}", f"cannot open {self.path} ({exc}); training "
                              "goes on, its lines are dropped until it can be written")

    def add(self, line: dict) -> None:
        """Append one line: now, or (in a burst) within FLUSH_S. ``line`` is kept as it is:
        pass a dict of your own."""
        now = time.monotonic()
        with self._lock:
            if self._closed.is_set():
                self.problems.say(f"closed {self.path}", f"a line for {self.path} came after "
                                  "finish(); it is dropped")
                return
            if self._burst or now - self._last < BURST_S:
                self._burst.append(line)
                if self._flusher is None:
                    self._start_flusher()
            else:
                self._write_lines([line], now)
            self._last = now

    def _start_flusher(self) -> None:
        self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                         name=f"cliffwatch {self.path.name}")
        self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._closed.wait(FLUSH_S):
            self.flush()

    def flush(self) -> None:
        """Write the burst's lines now."""
        with self._lock:
            lines, self._burst = self._burst, []
            if lines:
                self._write_lines(lines, time.monotonic())

    def _write_lines(self, lines: list[dict], now: float) -> None:
        if now >= self._next_check:
            self._next_check = now + CHECK_S
            self._check()
        if self._fd is None:
            self._dropped += len(lines)
            return
        text = "".join([_encode(line) + "\n" for line in lines])
        data = text.encode("utf-8", "surrogatepass")
        self._write(b"\n" + data if self._torn else data, len(lines))

    def _write(self, data: bytes, count: int) -> None:
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as exc:
            self._torn = self._torn or done > 0
            self._dropped += count
            self.problems.say(f"write {self.path}", f"cannot write {self.path} ({exc}); training"
                              " goes on, its lines are dropped until it can be written again")
            return
        self._torn = False
        if self._dropped:
            self.problems.forget(f"write {self.path}")
            self.problems.forget(f"open {self.path}")
            self.problems.say(f"again {self.path}", f"writing {self.path} again "
                              f"({self._dropped} lines were lost)")
            self.problems.forget(f"again {self.path}")
            self._dropped = 0

    def _check(self) -> None:
        """Reopen a file that was deleted (or never opened): its lines would go nowhere."""
        if self._fd is not None:
            try:
                if os.fstat(self._fd).st_nlink > 0:
                    return
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None
            self.problems.say(f"deleted {self.path}", f"{self.path} was deleted while the run "
                              "wrote it; training goes on and a new file is started there")
        self._open()
        self._torn = False

    def close(self) -> None:
        """Write what is left and close; later lines are dropped."""
        self.flush()
        self._closed.set()
        self.flush()  # a line another thread added meanwhile
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def write_json(path: Path, doc: dict, problems: Problems) -> None:
    """Replace ``path`` atomically with ``doc`` (a reader sees the old file or the new one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        problems.say(f"json {path}", f"cannot write {path} ({exc}); training goes on")
