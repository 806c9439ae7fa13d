"""What changed since the last ingest tick, as watchdog events named it, and the slow sweep
that makes up for the events that never came.

The watchdog thread notes each event; the ingest thread takes them all at its next tick::

    activity.note(event)   # watchdog thread: "runs/a/metrics.jsonl" modified
    activity.take()        # ingest thread -> Changes(files={"a/metrics.jsonl"}, created=set(),
                           #                          gone=set(), everything=False)

Events are hints: the tailer still decides from the file itself. A change no event reported (a
network filesystem without ``--poll``, an inotify queue overflow) is found by the sweep, which
looks at every tracked file and every folder once per ``scan_interval``, a share each tick, so
one pass over 10,000 files is spread out rather than a spike.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # watchdog is imported only where files are followed live (ingest --once
    # needs none of it)
    from watchdog.events import FileSystemEvent


@dataclass
class Changes:
    """Paths on disk, relative to the log directory."""

    files: set[str] = field(default_factory=set)  # may hold new bytes (or be new)
    created: set[str] = field(default_factory=set)  # new files or folders: look for logs in them
    gone: set[str] = field(default_factory=set)  # deleted or moved away (files or folders)
    everything: bool = False  # events may have been lost: look at every file and folder


class Activity:
    """The changes watchdog events named since the last ``take()`` (thread-safe)."""

    def __init__(self, logdir: str):
        self.prefix = logdir.rstrip("/") + "/"
        self.lock = threading.Lock()
        self.changes = Changes()

    def note(self, event: FileSystemEvent) -> bool:
        """Record an event; False for one that needs no look (our own database folder)."""
        src, dest = self._relative(event.src_path), self._relative(event.dest_path)
        kind = event.event_type
        if src is None and (kind != "moved" or dest is None):
            return False
        with self.lock:
            if kind == "moved":
                self._moved(src, dest)
            elif kind == "deleted":
                self.changes.gone.add(src)
            elif kind == "created":
                self.changes.created.add(src)
            elif not event.is_directory:
                self.changes.files.add(src)
        return True

    def _moved(self, src: str | None, dest: str | None) -> None:
        if src is not None:
            self.changes.gone.add(src)
        if dest is not None:
            self.changes.created.add(dest)

    def everything(self) -> None:
        """Events may have been missed (the way of watching changed): look at everything."""
        with self.lock:
            self.changes.everything = True

    def take(self) -> Changes:
        with self.lock:
            changes, self.changes = self.changes, Changes()
        return changes

    def _relative(self, path) -> str | None:
        """The path relative to the log directory, or None if it is outside it or hidden."""
        path = path.decode(errors="surrogateescape") if isinstance(path, bytes) else path
        if not path.startswith(self.prefix):
            return None
        rel = path[len(self.prefix):]
        if rel.startswith(".") or "/." in rel:
            return None  # our own database folder; reacting to it would wake us forever
        return rel


class Pace:
    """How many of ``total`` items a tick takes so that all are taken once per ``interval``
    seconds, whatever the ticks' rhythm (a fraction is carried to the next tick)."""

    def __init__(self, interval: float):
        self.interval, self.last, self.carry = interval, time.monotonic(), 0.0

    def due(self, total: int) -> int:
        now = time.monotonic()
        share = total * min(1.0, (now - self.last) / max(self.interval, 1e-3)) + self.carry
        self.last = now
        taken = min(int(share), total)
        self.carry = share - taken if taken < total else 0.0
        return taken
