"""Whether another trainer's file, not read before, holds a log: an answer from its first
bytes (formats/detect.py). A file that is none is recorded once as skipped; one that cannot
tell yet (empty, no complete line) is asked again when it grows (``undecided``), and a text
file's lines already looked at are not looked at again (``sniffed``)::

    sniffer = Sniffer(store, reads)
    sniffer.is_log(state, new, handle, files)   # True: read it; False: skipped, or wait
    sniffer.still(state.path, info)             # undecided and not grown since: no look
"""

from __future__ import annotations

import copy

from . import saves
from .filestate import FileState
from .formats import detect
from .openfile import LogHandle
from .parse import Problem
from .reads import Reads
from .store import Store
from .tracking import skip


class Sniffer:
    def __init__(self, store: Store, reads: Reads):
        self.store, self.reads = store, reads
        self.undecided: dict[str, tuple[int, float]] = {}  # path -> (size, mtime) sniffed
        # text files not a log yet: path -> (inode, where the lines looked at so far end)
        self.sniffed: dict[str, tuple[int, int]] = {}

    def still(self, path: str, info) -> bool:
        """A file that could not tell what it is yet, and has not grown since."""
        return self.undecided.get(path) == (info.st_size, info.st_mtime)

    def is_log(self, state: FileState, new: FileState, handle: LogHandle, files) -> bool:
        copy_of = saves.take_over(self.store, files, state, new, handle.real)
        if copy_of:
            skip(self.store, state, new, copy_of)
            return False
        name = state.path.rsplit("/", 1)[-1]
        before = self._sniffed_to(state.path, handle)
        head = self.reads.read(handle, before, detect.sniff_bytes(name) - before)
        fmt, why = detect.detect(name, head, self.store.keymap(state.run), before)
        self.sniffed.pop(state.path, None)
        if fmt == detect.PENDING and detect.by_name(name) == detect.TEXT:
            self.sniffed[state.path] = (handle.info.st_ino, before + head.rfind(b"\n") + 1)
        if fmt == detect.PENDING:
            if why.startswith(detect.NOT_YET) and state.path not in self.undecided:
                # said once (each start): a text file with no log line so far, kept looking at
                self.store.record(state, copy.copy(state), Problem(0, "info", why))
            self.undecided[state.path] = (handle.info.st_size, handle.info.st_mtime)
            return False
        self.undecided.pop(state.path, None)
        if fmt is None:
            skip(self.store, state, new, why)
            return False
        return True

    def _sniffed_to(self, path: str, handle: LogHandle) -> int:
        """Where a text file's lines looked at before end (0 if replaced or cut since)."""
        inode, end = self.sniffed.get(path, (None, 0))
        return end if inode == handle.info.st_ino and end <= handle.info.st_size else 0
