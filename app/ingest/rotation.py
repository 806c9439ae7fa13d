"""Rotation: a file renamed away by logrotate ``create`` (metrics.jsonl -> metrics.jsonl.1),
found again by its inode. Lines the old file got after the last look are read from it before
the new file starts, and the trainer may still write to it through its open handle after the
switch, so it is followed until it has not grown for ROTATE_WAIT_S (like Fluent Bit's
Rotate_Wait)::

    rotations = Rotations(root, store, reads)
    rows, renamed = rotations.finish_renamed(state, disk_path, consume)  # at the switch
    rows = rotations.follow(state)   # each tick after, while the old file may still grow
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from . import careful, follow, wholefile
from .filestate import FileState
from .openfile import Refused, open_log
from .parse import Problem
from .reads import Reads
from .store import Store

log = logging.getLogger("cliffwatch.ingest")
ROTATE_WAIT_S = 10.0  # a rotated file is followed until it has not grown for this long


@dataclass
class Rotated:
    """A file renamed away by logrotate ``create``: the trainer may still write to it
    through its open handle after the tailer switched to the new file. ``old`` is its
    position, attempt and last step (never stored in ``files``)."""

    rel: str  # its new name, relative to the log directory
    old: FileState
    grew: float  # time.monotonic() it last grew (or was renamed)


class Rotations:
    def __init__(self, root: Path, store: Store, reads: Reads):
        self.root, self.store, self.reads = root, store, reads
        self.rotated: dict[str, Rotated] = {}  # tracked path -> its file before the rotation

    def finish_renamed(self, state: FileState, disk: str, consume) -> tuple[int, str | None]:
        """The file at ``disk`` (its path on disk) was renamed in its folder and maybe a new
        one created: read the old inode to its last complete line, each piece through
        ``consume(state, new, data, handle, None)``. Returns (rows, its new name or None)."""
        if state.inode is None or state.state != "ok" or state.kind in wholefile.KINDS:
            return 0, None
        folder, name = os.path.split(disk)
        renamed = follow.find_inode(self.root / folder, state.inode, name)
        if renamed is None:
            return 0, None
        try:
            handle = open_log(self.root, os.path.join(folder, renamed))
        except (OSError, Refused):
            return 0, None
        rows = 0
        with handle:
            if handle.info.st_ino != state.inode or follow.change(state, handle):
                return 0, None
            while data := self.reads.read(handle, state.offset, self.reads.chunk):
                end = data.rfind(b"\n") + 1
                if end == 0:
                    break  # an unfinished last line waits in self.rotated, then is dropped
                rows += consume(state, copy.copy(state), data[:end], handle, None)
        self.rotated[state.path] = Rotated(os.path.join(folder, renamed), copy.copy(state),
                                           time.monotonic())
        return rows, renamed

    def switched(self, state: FileState, disk: str, consume) -> int:
        """The file under the tracked name is another inode now: ``finish_renamed``, and a
        note of the rotation if the old file was found. Returns rows."""
        rows, renamed = self.finish_renamed(state, disk, consume)
        if renamed:
            self.store.record(state, copy.copy(state), Problem(state.offset, "warning", (
                f"file renamed to {renamed} (rotated); read to its end, {state.offset} "
                "bytes; the new file is read from its start")))
        return rows

    def follow(self, state: FileState) -> int:
        """Read what a rotated file got since the switch (the trainer's handle still points at
        it until it reopens its log); let it go once it has not grown for ROTATE_WAIT_S."""
        rotated = self.rotated.get(state.path)
        if rotated is None:
            return 0
        if time.monotonic() - rotated.grew > ROTATE_WAIT_S:
            del self.rotated[state.path]
            return 0
        try:
            handle = open_log(self.root, rotated.rel)
        except (OSError, Refused):
            del self.rotated[state.path]
            return 0
        with handle:
            if handle.info.st_ino != rotated.old.inode or handle.info.st_size < rotated.old.offset:
                del self.rotated[state.path]
                return 0
            data = self.reads.read(handle, rotated.old.offset, self.reads.chunk)
            end = data.rfind(b"\n") + 1
            if end == 0:
                return 0
            old = copy.copy(rotated.old)
            rows, refused = careful.store_late(self.store, state, old, data[:end])
            if refused is not None:
                log.warning("%s: lines of %s refused (%s); not read", state.path, rotated.rel,
                            refused)
                del self.rotated[state.path]
                return 0
        old.offset += end
        rotated.old, rotated.grew = old, time.monotonic()
        return rows
