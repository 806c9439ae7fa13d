"""How the log directory is watched: inotify, one watch per folder, or polling.

Watchdog's recursive inotify observer takes one inotify watch per folder from a per-user limit
(``fs.inotify.max_user_watches``), in an inotify instance (``fs.inotify.max_user_instances``).
Watchdog raises when the instance or the log directory's own watch cannot be had, but skips a
sub-folder whose watch the kernel refuses, without a word. So after start, and for each folder
created later, the kernel's list of this process's watches (``/proc/self/fdinfo``) is checked
against the folders; a folder left out is watched once more by a probe of our own, whose errno
says which limit ran out. Then the server says so once, in its log and in /api/health, and
watchdog's polling observer takes over (as with ``--poll``)::

    inotify watch limit reached (fs.inotify.max_user_watches is 8192): 1203 of 10412 folders
    under /runs are not watched. Polling takes over (as with --poll): new lines still arrive,
    for a stat of every file each second. To watch with inotify again, raise the limit as
    root: sysctl fs.inotify.max_user_watches=524288 (keep it in /etc/sysctl.d/), then restart
    cliffwatch.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
)
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from .scan import folders

# The events that can mean new bytes or new files. Opening and reading a file (as the tailer
# does) is left out, so the kernel does not even queue the events of our own reads.
EVENTS = [FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileMovedEvent,
          FileDeletedEvent, DirCreatedEvent, DirMovedEvent, DirDeletedEvent]


log = logging.getLogger("cliffwatch.ingest")
POLL_S = 1.0  # seconds between the polling observer's looks at the whole tree
IN_MODIFY = 0x2
PROBES = 3  # folders found unwatched that are tried again to learn why (a limit, or a race)
LIMITS = {  # errno -> (what ran out, its sysctl, a value that raises it)
    errno.ENOSPC: ("watch", "max_user_watches", 524288),
    errno.EMFILE: ("instance", "max_user_instances", 1024),
}


class Watching:
    """The observer that turns file changes into events for ``handler``."""

    def __init__(self, logdir: Path, handler, poll: bool = False):
        self.logdir, self.handler = Path(logdir), handler
        self.mode = "polling (--poll)" if poll else "inotify"
        self.problem: str | None = None  # why inotify is not used, said once
        self.observer = None

    def start(self) -> None:
        if self.mode == "inotify":
            try:
                self.observer = self._started(Observer())
            except OSError as exc:
                if exc.errno not in LIMITS:
                    raise
                self._fall_back(exc.errno, "the log directory itself is not watched")
                return
            self.check(None)
        else:
            self.observer = self._started(PollingObserver(timeout=POLL_S))

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)

    def check(self, created: list[str] | None) -> bool:
        """Whether inotify still covers every folder: all of them (``None``, at start) or the
        new ones (paths relative to the log directory). When a limit ran out, polling takes
        over; returns True then (events may have been missed: look at everything)."""
        if self.mode != "inotify":
            return False
        todo = self._folders(created)
        if not todo:
            return False
        watched = watched_inodes()
        if watched is None:  # no /proc (not Linux?): nothing to check against
            return False
        missing = [path for ino, path in todo.items() if ino not in watched]
        for path in missing[:PROBES]:  # one that can be watched: no limit ran out
            failed = probe(path)
            if failed in LIMITS:
                total = len(todo) if created is None else None
                self._fall_back(failed, f"{len(missing)} of {total} folders under "
                                f"{self.logdir} are not watched" if total else
                                f"{path} is not watched")
                return True
        return False

    def _folders(self, created: list[str] | None) -> dict[int, str]:
        """Inode -> path of the folders to check."""
        if created is None:
            paths = [self.logdir / rel for rel, _ in folders(self.logdir)]
        else:
            paths = [self.logdir / rel for rel in created]
        found = {}
        for path in paths:
            try:
                info = os.lstat(path)
            except OSError:
                continue  # gone again
            if info.st_mode & 0o170000 == 0o040000:  # a folder, not a link to one
                found[info.st_ino] = str(path)
        return found

    def _started(self, observer):
        observer.schedule(self.handler, str(self.logdir), recursive=True, event_filter=EVENTS)
        observer.start()
        return observer

    def _fall_back(self, failed: int, what: str) -> None:
        """Say once what ran out and how to raise it, and poll instead."""
        self.problem = limit_message(failed, what)
        log.warning("%s", self.problem)
        self.stop()
        self.mode = "polling (inotify limit reached)"
        self.observer = self._started(PollingObserver(timeout=POLL_S))


def limit_message(failed: int, what: str) -> str:
    noun, name, raised = LIMITS[failed]
    value = read_limit(f"/proc/sys/fs/inotify/{name}")
    own = read_limit(f"/proc/sys/user/max_inotify_{name.rsplit('_', 1)[1]}")
    here = f"; {own} in this user namespace" if own is not None and own != value else ""
    return (f"inotify {noun} limit reached (fs.inotify.{name} is {value}{here}): {what}. "
            "Polling takes over (as with --poll): new lines still arrive, for a stat of every "
            "file each second. To watch with inotify again, raise the limit as root: sysctl "
            f"fs.inotify.{name}={raised} (keep it in /etc/sysctl.d/), then restart cliffwatch.")


def read_limit(path: str) -> int | None:
    try:
        return int(Path(path).read_text())
    except (OSError, ValueError):
        return None


def watched_inodes() -> set[int] | None:
    """The inodes this process's inotify instances watch, as the kernel lists them
    (``inotify wd:1 ino:1a2b sdev:...`` in /proc/self/fdinfo), or None without /proc."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    inodes: set[int] = set()
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            text = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue  # closed meanwhile
        inodes.update(int(line.split("ino:", 1)[1].split()[0], 16)
                      for line in text.splitlines() if line.startswith("inotify wd:"))
    return inodes


def probe(path: str) -> int | None:
    """Try to watch ``path`` with an inotify instance of our own (closed at once); the errno
    it fails with, or None when it can be watched."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        return ctypes.get_errno()
    try:
        if libc.inotify_add_watch(fd, os.fsencode(path), IN_MODIFY) < 0:
            return ctypes.get_errno()
        return None
    finally:
        os.close(fd)
