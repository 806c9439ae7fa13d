"""How many bytes a tick reads from one file, and the count of all bytes read.

One budget per file and tick (``chunk_bytes``, but always a whole line of the longest size
allowed), so a burst in one run never holds up the others; after running out of memory a
file's reads are smaller (retry.py's ``shrunk``), but always at least one line::

    reads = Reads(settings.chunk_bytes)
    data, more = reads.take(handle, offset, small=None)   # one budget; more: it was filled
    reads.bytes_read   # from log files, in all (tests check that nothing is read twice)
"""

from __future__ import annotations

from .openfile import LogHandle
from .parse import MAX_LINE


def chunk_of(chunk_bytes: int) -> int:
    """The bytes of one read: the setting, but never less than a line that should be stored
    (whole: never split)."""
    return max(chunk_bytes, MAX_LINE + 1)


class Reads:
    def __init__(self, chunk_bytes: int):
        self.chunk = chunk_of(chunk_bytes)
        self.bytes_read = 0

    def read(self, handle: LogHandle, offset: int, size: int) -> bytes:
        data = handle.read(offset, size)
        self.bytes_read += len(data)
        return data

    def take(self, handle: LogHandle, offset: int, small: int | None) -> tuple[bytes, bool]:
        """The bytes to read this tick from ``offset``, and whether more may follow at once:
        one budget, or (``small``, after running out of memory) the whole lines within fewer
        bytes, but always at least one line."""
        chunk = self.chunk
        data = self.read(handle, offset, small or chunk)
        if small is None:
            return data, len(data) == chunk
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) == small:  # the first line is longer: read it whole
            data += self.read(handle, offset + small, chunk - small)
            end = data.find(b"\n") + 1
        if end == 0:
            return data, len(data) == chunk
        return data[:end], True
