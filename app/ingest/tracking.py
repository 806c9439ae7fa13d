"""Registering new files: which log files the tailer tracks, under which stored path.

A full walk of the log directory at start (``discover``); afterwards only where events say
something was created, plus this tick's share of a slow walk of every folder, so 10,000 quiet
runs cost nothing per tick. Folders whose permissions refuse a listing are said once and
tried again every tick (no event says that permissions changed). Of two logs of one run in a
folder, one is read (formats/detect.py's ``choose``); the other is recorded as skipped::

    tracker = Tracker(db, logdir, store, settings.scan_interval)
    tracker.discover()            # the whole walk
    tracker.changed(changes)      # -> stored paths of the files found where events point
    tracker.named(changes)        # -> the tracked paths those events name
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path

from .activity import Changes, Pace
from .filestate import FileState
from .formats import detect
from .parse import Problem
from .scan import folders, in_folder, readable, scan
from .store import Store

log = logging.getLogger("cliffwatch.ingest")


def skip(store: Store, state: FileState, new: FileState, why: str) -> None:
    """Record once that a file is not read, and why (an ``info`` row, not an error)."""
    new.state = "skipped"
    store.record(state, new, Problem(0, "info", f"not read: {why}"))


class Tracker:
    def __init__(self, db, logdir: Path, store: Store, scan_interval: float):
        self.db, self.logdir, self.store = db, logdir, store
        self.files = {f.path: f for f in store.load_files()}
        self.on_disk: dict[str, str] = {}  # stored path -> path on disk, where names differ
        self.stored_as: dict[str, str] = {}  # path on disk -> stored path (on_disk reversed)
        self.known = set(self.files)  # paths on disk of the tracked files: not classified again
        self.links_noted: set[str] = set()  # folder links out of the log directory, reported
        # folders (on disk) whose permissions refuse a listing: tried again every tick, since
        # no event says that permissions changed; and those said in the log (once each)
        self.locked: set[str] = set()
        self.locked_said: set[str] = set()
        self.folder_pace = Pace(scan_interval)  # the sweep's walk over the folders
        self.walk = None  # the sweep's walk of the folders, under way
        self.walk_refused: list[str] = []  # folders it could not list, said at each step
        self.walked = 0  # folders it has met so far
        self.folder_count = 0  # folders the last whole walk met
        self._reconsider_text()

    def disk(self, path: str) -> str:
        """A tracked file's path on disk, relative to the log directory."""
        return self.on_disk.get(path, path)

    def discover(self, reload: bool = False) -> None:
        """The whole walk; ``reload``: a failed call may have registered files after all."""
        if reload:
            for state in self.store.load_files():
                self.files.setdefault(state.path, state)
                self.known.add(state.path)
        links_out: list[str] = []
        found, self.folder_count, refused = [], 0, []
        for folder, entries in folders(self.logdir, refused=refused):
            found += in_folder(self.logdir, folder, entries, self.known, links_out)
            self.folder_count += 1
        self.locked = set()
        self._lock(refused)
        self._track(found, links_out)
        self.walk = None  # the sweep starts its walk again

    def changed(self, changes: Changes) -> list[str]:
        """Look for new log files where events say something was created (or a file no
        tracked path names was written), and in this tick's share of the sweep's walk; returns
        the stored paths of the files found."""
        links_out: list[str] = []
        found = self._unlocked(links_out) if self.locked else []
        unknown = {p for p in changes.files if p not in self.known}
        for rel in changes.created | unknown:
            found += self._created(rel, links_out)
        for folder, entries in self._sweep_folders():
            found += in_folder(self.logdir, folder, entries, self.known, links_out)
        return self._track(found, links_out)

    def named(self, changes: Changes) -> set[str]:
        """The tracked paths that events name: files written or created (a file created by a
        rename onto a tracked name is tracked already, and read again), and those that were,
        or were under, folders deleted, moved away or created."""
        paths = {self.stored_as.get(p, p) for p in changes.files | changes.created}
        folders_named = changes.gone | {p for p in changes.created
                                        if os.path.isdir(f"{self.logdir}/{p}")}
        if folders_named:
            prefixes = tuple(g + "/" for g in folders_named)
            paths.update(path for path in self.files if (disk := self.disk(path))
                         in folders_named or disk.startswith(prefixes))
        return paths

    def _track(self, found: list, links_out: list[str]) -> list[str]:
        """Register log files found on disk; returns the stored paths of those not tracked
        before."""
        added: set[str] = set()
        new, fresh = [], {}
        for item in found:
            self.known.add(item.real or item.path)
            if item.real is not None:
                self.on_disk[item.path] = item.real
                self.stored_as[item.real] = item.path
            if item.path not in self.files:
                fresh[item.path] = (item.run, item.path, item.kind)
        for state in self.store.add_files(list(fresh.values())):  # one statement for all
            self.files[state.path] = state
            added.add(state.path.rpartition("/")[0])
            new.append(state.path)
        if added:
            self._choose(added)
        for link in set(links_out) - self.links_noted:
            self.db.run("ingest/note_once", {"run": link, "file": link, "reason": (
                f"{link} is a folder link that leads outside the log directory; it is not "
                "read (copy or move the run folder into the log directory to monitor it)")})
            self.links_noted.add(link)
        return new

    def _created(self, rel: str, links_out: list[str]) -> list:
        path = self.logdir / rel
        if path.is_dir() and not path.is_symlink():
            refused: list[str] = []
            found = scan(self.logdir, links_out, self.known, top=rel, refused=refused)
            self._lock(refused)
            return found
        folder, _, name = rel.rpartition("/")
        try:
            with os.scandir(self.logdir / folder) as entries:
                entry = [e for e in entries if e.name == name]
        except OSError:
            return []
        return in_folder(self.logdir, folder, entry, self.known, links_out)

    def _lock(self, refused: list[str]) -> None:
        """Folders that cannot be listed: said once, in ingest_errors and the log, and tried
        again every tick (``_unlocked``)."""
        for rel in refused:
            self.locked.add(rel)
            if rel in self.locked_said:
                continue
            self.locked_said.add(rel)
            shown = readable(rel) or "."
            reason = (f"the folder {shown} cannot be listed (permission denied), so no log in it "
                      "is read; fix its permissions (chmod a+rx, or run cliffwatch as a user "
                      "that may read it) and its logs are read at the next tick")
            log.warning("%s", reason)
            self.db.run("ingest/note_once", {"run": shown, "file": shown, "reason": reason})

    def _unlocked(self, links_out: list[str]) -> list:
        """The logs in folders that could not be listed before and can now (those that still
        cannot stay locked)."""
        refused: list[str] = []
        found = []
        for rel in sorted(self.locked):
            found += scan(self.logdir, links_out, self.known, top=rel, refused=refused)
        self.locked = set()
        self._lock(refused)
        return found

    def _sweep_folders(self) -> list:
        """This tick's share of the slow walk of every folder (a new walk once one ends)."""
        share = []
        for _ in range(self.folder_pace.due(max(self.folder_count, 1))):
            if self.walk is None:
                self.walk_refused = []
                self.walk, self.walked = folders(self.logdir, refused=self.walk_refused), 0
            step = next(self.walk, None)
            self._lock(self.walk_refused)
            self.walk_refused.clear()
            if step is None:
                self.walk, self.folder_count = None, self.walked
                break
            self.walked += 1
            share.append(step)
        return share

    def _choose(self, folders: set[str]) -> None:
        """Of two logs of one run in a folder, read one (formats/detect.py's ``choose``): the
        other is recorded as skipped."""
        members: dict[str, dict[str, FileState]] = {f: {} for f in folders}
        for state in self.files.values():
            folder, _, name = state.path.rpartition("/")
            if folder in members:
                members[folder][name] = state
        for names in members.values():
            current = [n for n, s in names.items() if s.state == "ok" and s.offset > 0]
            for name, why in detect.choose(names, current)[1]:
                if names[name].state != "skipped":
                    skip(self.store, names[name], copy.copy(names[name]), why)

    def _reconsider_text(self) -> None:
        """Text files skipped when only llm.c's lines were read (kind ``llmc``, not read at
        all) are asked again under the text reader's rules (formats/detect.py), once per
        start; not one that another log of its folder wins over (``choose``)."""
        folders: dict[str, list[FileState]] = {}
        for state in self.files.values():
            folders.setdefault(state.path.rpartition("/")[0], []).append(state)
        for members in folders.values():
            losers = {name for name, _ in detect.choose(
                [m.path.rpartition("/")[2] for m in members])[1]}
            for state in members:
                if (state.kind, state.state, state.offset) == (detect.LLMC, "skipped", 0) \
                        and state.path.rpartition("/")[2] not in losers:
                    state.state = "ok"  # in memory: the next read decides and commits
