"""The ingest worker: a thread that runs the tailer, woken early by watchdog events.

Events are hints only. The worker also scans the whole log directory at start and every
``scan_interval`` seconds, and ticks every ``tick_interval`` seconds even when no event came,
so a missed or coalesced inotify event (or a network filesystem with ``--poll``) only delays a
line, never loses it. When a file had more than one tick's budget to read, the next tick starts
at once. ``failure`` says what is failing and being retried (None when healthy), and that a
tick has not returned for far longer than any should (a read that blocks, a stuck database)::

    "ingest of demo/metrics.jsonl failing for 12 s: OutOfMemoryException: ...; retrying"
    "ingest failing: stuck for 45 s in one tick (a file or the database does not answer); ..."
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pyarrow as pa
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from .backoff import describe
from .tail import Tailer

log = logging.getLogger("cliffwatch.ingest")
DEBOUNCE_S = 0.01  # let a burst of appends land in one transaction
STUCK_S = 30.0  # a tick this long is stuck: a 64 MB chunk per file takes about a second


class _Wake(FileSystemEventHandler):
    def __init__(self, worker: IngestWorker):
        self.worker = worker

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = str(event.src_path)
        if "/." in path[len(str(self.worker.logdir)):]:
            return  # our own database folder; reacting to it would wake us forever
        if event.event_type in ("created", "moved", "deleted"):
            self.worker.rescan.set()
        self.worker.wake.set()


class IngestWorker:
    def __init__(self, tailer: Tailer, settings, poll: bool = False):
        self.tailer, self.settings = tailer, settings
        self.logdir = Path(tailer.logdir)
        self.wake, self.rescan, self.stop_flag = threading.Event(), threading.Event(), False
        self.observer = PollingObserver(timeout=1.0) if poll else Observer()
        self.thread = threading.Thread(target=self._loop, name="cliffwatch-ingest", daemon=True)
        self.ticks = 0
        self.listeners: list = []  # called (in this thread) after a tick that stored rows
        self.tick_error: str | None = None  # a tick that failed outside any one file
        self.tick_started: float | None = None  # time.monotonic() of the tick under way
        self.stuck_after_s = STUCK_S

    def start(self) -> None:
        pa.array([0.0])  # pyarrow imports pandas on first use (0.3 s): pay it before any line
        self.tailer.tick(discover=True)  # catch up (one budget per file) before serving
        if self.tailer.behind:
            self.wake.set()
        self.observer.schedule(_Wake(self), str(self.logdir), recursive=True)
        self.observer.start()
        self.thread.start()

    def stop(self) -> None:
        self.stop_flag = True
        self.wake.set()
        self.observer.stop()
        self.thread.join(timeout=10)
        self.observer.join(timeout=5)

    @property
    def failure(self) -> str | None:
        """One line on what ingest is failing at and retrying, or None when healthy."""
        started = self.tick_started
        if started is not None and time.monotonic() - started > self.stuck_after_s:
            return (f"ingest failing: stuck for {time.monotonic() - started:.0f} s in one tick "
                    "(a file or the database does not answer); restart the server if it stays")
        if self.tick_error is not None:
            return self.tick_error
        return self.tailer.failure

    def lag_s(self) -> float:
        """Seconds since the last moment everything complete on disk was ingested."""
        return max(0.0, time.time() - self.tailer.last_caught_up)

    def _loop(self) -> None:
        next_scan = time.monotonic() + self.settings.scan_interval
        while not self.stop_flag:
            self.wake.wait(self.settings.tick_interval)
            if self.stop_flag:
                break
            time.sleep(DEBOUNCE_S)
            self.wake.clear()
            discover = self.rescan.is_set() or time.monotonic() >= next_scan
            if discover:
                self.rescan.clear()
                next_scan = time.monotonic() + self.settings.scan_interval
            rows = self._tick(discover)
            self.ticks += 1
            if self.tailer.behind:
                self.wake.set()  # a file has more to read: no pause before the next tick
            for listener in self.listeners if rows else ():
                listener()

    def _tick(self, discover: bool) -> int:
        """One tick; a failure outside any one file is logged once per episode, not per tick."""
        self.tick_started = time.monotonic()
        try:
            rows = self.tailer.tick(discover=discover)
        except Exception as exc:  # the thread must go on
            if self.tick_error is None:
                log.exception("ingest tick failed; retrying every tick")
            self.tick_error = f"ingest tick failing: {describe(exc)}; retrying"
            return 0
        finally:
            self.tick_started = None
        self.tick_error = None
        return rows
