"""The ingest worker: a thread that runs the tailer, woken early by watchdog events.

Events are hints only, but they say where to look: a tick reads the files events named (and
looks for logs in the folders they created), the files with work under way and those of live
runs that grew lately; a file of a finished run costs nothing until an event names it. The
whole log directory is scanned at start, and a slow sweep looks at every file and folder once
per ``scan_interval`` seconds, a share per tick (every ``tick_interval`` seconds even when no
event came), so a missed or coalesced inotify event (or a network filesystem without
``--poll``) only delays a line, never loses it. When a file had more than one tick's budget to
read, the next tick starts at once. How the folders are watched, and what to do when an inotify
limit runs out, is in watches.py. ``failure`` says what is failing and being retried (None when
healthy), and that a tick has not returned for far longer than any should (a read that blocks,
a stuck database)::

    "ingest of demo/metrics.jsonl failing for 12 s: OutOfMemoryException: ...; retrying"
    "ingest failing: stuck for 45 s in one tick (a file or the database does not answer); ..."

When DuckDB invalidates the database, the database's keeper opens it again (database.py); the
next tick then starts from a new tailer that knows only what the database holds, as after a
restart, and looks at every file: each line still arrives once.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler

from ..db.database import DatabaseLost
from ..db.loss import damaged, rebuild_advice
from .activity import Activity, Changes
from .backoff import describe
from .formats import ahead
from .tail import Tailer
from .watches import Watching

log = logging.getLogger("cliffwatch.ingest")
DEBOUNCE_S = 0.01  # let a burst of appends land in one transaction
STUCK_S = 30.0  # a tick this long is stuck: a 64 MB chunk per file takes about a second
CPU_LOG_S = 60.0  # with debug logging, the ingest thread's own CPU is logged this often


class _Wake(FileSystemEventHandler):
    def __init__(self, worker: IngestWorker):
        self.worker = worker

    def on_any_event(self, event: FileSystemEvent) -> None:
        if self.worker.activity.note(event):
            self.worker.wake.set()


class IngestWorker:
    def __init__(self, tailer: Tailer, settings, poll: bool = False):
        self.tailer, self.settings = tailer, settings
        self.logdir = Path(tailer.logdir)
        self.wake, self.stop_flag = threading.Event(), False
        self.activity = Activity(str(self.logdir))
        self.watching = Watching(self.logdir, _Wake(self), poll=poll)
        self.thread = threading.Thread(target=self._loop, name="cliffwatch-ingest", daemon=True)
        self.ticks = 0
        self.listeners: list = []  # called (in this thread) after a tick that stored rows
        self.tick_error: str | None = None  # a tick that failed outside any one file
        self.tick_started: float | None = None  # time.monotonic() of the tick under way
        self.stuck_after_s = STUCK_S
        self.generation = tailer.db.generation  # the database opening the tailer reads

    def start(self) -> None:
        self.catch_up()
        self.follow()

    def catch_up(self) -> None:
        """The first tick: every file, one budget each. ``serve`` runs it in a thread of its
        own while the web stack imports (server/catchup.py), then calls ``follow``."""
        self.tailer.db.keep()  # a following ingest outlives an invalidated database
        self.tailer.tick(discover=True)

    def follow(self) -> None:
        """Watch the folders and tick in this worker's thread, after ``catch_up``."""
        self.watching.start()
        self.activity.everything()  # what changed before the watches were set: one full look
        self.wake.set()
        self.thread.start()

    def stop(self) -> None:
        self.stop_flag = True
        self.wake.set()
        self.thread.join(timeout=10)
        self.watching.stop()

    @property
    def failure(self) -> str | None:
        """One line on what ingest is failing at and retrying, or None when healthy."""
        failure = self._failure()
        if failure is not None and damaged(failure):
            return f"{failure}; {rebuild_advice()}"
        return failure

    def _failure(self) -> str | None:
        lost = self.tailer.db.failure
        if lost is not None:
            return f"ingest paused: {lost}"
        if self.tailer.retry.fatal is not None:  # seen by the tailer before the keeper's look
            return ("ingest paused: DuckDB invalidated the database; it is being opened again "
                    "by itself (database_error in /api/health says why)")
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
        cpu = (time.thread_time(), time.monotonic(), self.ticks)
        while not self.stop_flag:
            self.wake.wait(self.settings.tick_interval)
            if self.stop_flag:
                break
            time.sleep(DEBOUNCE_S)
            self.wake.clear()
            rows = self._tick(self.activity.take())
            if not self.ticks:
                ahead.finish()  # what was decoded ahead was for the first reads (serve's)
            self.ticks += 1
            if time.monotonic() - cpu[1] >= CPU_LOG_S:
                cpu = self._log_cpu(*cpu)
            if self.tailer.behind:
                self.wake.set()  # a file has more to read: no pause before the next tick
            for listener in self.listeners if rows else ():
                listener()

    def _log_cpu(self, cpu: float, since: float, ticks: int) -> tuple[float, float, int]:
        """Log (debug) the CPU this thread used since the last report: the cost of ingest
        alone, apart from the server's other threads."""
        now = (time.thread_time(), time.monotonic(), self.ticks)
        log.debug("ingest thread: %.1f%% of a core over %.0f s (%d ticks, %d files)",
                  100 * (now[0] - cpu) / (now[1] - since), now[1] - since, now[2] - ticks,
                  len(self.tailer.files))
        return now

    def _tick(self, changes: Changes | None = None) -> int:
        """One tick (of every file when no ``changes`` are given); a failure outside any one
        file is logged once per episode, not per tick."""
        self.tick_started = time.monotonic()
        try:
            if self.tailer.db.generation != self.generation:
                changes = self._reopened()  # every file and folder, whatever events said
            if changes and changes.created and self.watching.check(sorted(changes.created)):
                changes.everything = True  # watching changed: events may have been missed
            rows = self.tailer.tick(changes=changes or None)
        except Exception as exc:  # the thread must go on
            expected = isinstance(exc, DatabaseLost) or self.tailer.db.suspect(exc)
            if not expected and self.tick_error is None:  # the database's episode is logged
                log.exception("ingest tick failed; retrying every tick")
            self.tick_error = f"ingest tick failing: {describe(exc)}; retrying"
            self.activity.everything()  # what the events named is not lost with the tick
            return 0
        finally:
            self.tick_started = None
        if self.tailer.retry.fatal is not None:
            self.tailer.db.suspect(self.tailer.retry.fatal)  # the keeper opens the file again
        self.tick_error = None
        return rows

    def _reopened(self) -> Changes:
        """The database was opened again: what this process kept of each file (offsets,
        unfinished lines, backoffs) may be ahead of what was committed. A new tailer reads it
        all back from the tables, as a restart would, and this tick looks at every file."""
        generation, old = self.tailer.db.generation, self.tailer
        self.tailer = Tailer(old.db, old.logdir, old.settings, old.scratch,
                             fast_path=old.fast_path, links=old.links)
        self.generation = generation
        log.warning("ingest resumes from the offsets stored in the database opened again")
        return Changes(everything=True)  # discover too: folders may have come meanwhile
