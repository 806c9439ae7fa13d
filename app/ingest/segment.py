"""A segment: the complete lines of one file that one transaction is to store, and where they
sit. The tailer (tail.py) decides what to read; the fast path (fast.py) and the careful path
(careful.py) each store a segment, and both move the file's position the same way (``after``)::

    Segment(state=<demo/metrics.jsonl at 81920>, start=<the same, or reset to 0>,
            handle=<the checked descriptor>, data=b'{"step": 401, ...}\\n...', reason=None)

``data`` None means the whole file from its start, up to ``handle.info.st_size``, left on
disk for DuckDB to read (catch-up after a restart); only the fast path takes that form.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from . import follow
from .filestate import FileState
from .openfile import LogHandle

HEAD_BYTES = 64  # the first bytes of a file, kept as its identity (follow.py)


@dataclass
class Segment:
    state: FileState  # the file as committed (changed only by a commit)
    start: FileState  # its position before ``data``: a copy, reset to 0 if the file was replaced
    handle: LogHandle
    data: bytes | None  # complete lines (ending in \n); None: the whole file, on disk
    reason: str | None = None  # file_truncated | file_replaced: read again from its start

    @property
    def size(self) -> int:
        """Bytes in the segment."""
        return self.handle.info.st_size if self.data is None else len(self.data)

    def after(self, upto: int | None = None) -> FileState:
        """The file's position after the segment's first ``upto`` bytes (all by default),
        which must end a line."""
        upto = self.size if upto is None else upto
        new = copy.copy(self.start)
        new.offset, new.size = self.start.offset + upto, self.handle.info.st_size
        if self.start.offset < HEAD_BYTES:  # the file's first bytes, as far as read
            new.head = self.handle.read(0, min(HEAD_BYTES, new.offset)).hex()
        if self.data is None:
            new.tail = follow.fingerprint(self.handle, new.offset)
            return new  # the line count is known once DuckDB has read the file
        new.lines += self.data.count(b"\n", 0, upto)
        new.tail = follow.fingerprint(self.handle, new.offset,
                                     self.data[max(0, upto - follow.WINDOW):upto])
        return new
