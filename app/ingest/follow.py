"""Is this still the file we were reading? Identity by inode, first bytes and the bytes just
before the committed offset; and where a rotated file went.

A file keeps its identity while its inode is the same and the ``WINDOW`` bytes before the
stored offset are still there (``files.tail`` holds their hash). ``copytruncate`` (truncate,
then rewrite with the same first line) keeps the inode and may even regrow past the offset, but
a restarted trainer's lines differ somewhere in the last few lines (a window of several lines,
since a value that changed may sit anywhere in a line)::

    change(state, handle)   # -> None | "file_truncated" | "file_replaced"
    new, reason = position(state, handle)   # the row to update, reset to 0 on a change

Another inode that begins with the very bytes read so far is a copy of the file (a folder
restored or moved to another disk with its database, a log rewritten whole and renamed over
itself): it is read on from the offset (``change``'s ``copies``).

logrotate's ``create`` renames ``metrics.jsonl`` to ``metrics.jsonl.1`` and creates a new
``metrics.jsonl``; the old inode is found again in the same folder (``find_inode``) and read to
its end before the new file starts, as Vector and Fluent Bit do.
"""

from __future__ import annotations

import copy
import hashlib
import os
from pathlib import Path

from .filestate import FileState, grown
from .openfile import LogHandle

WINDOW = 4096


def fingerprint(handle: LogHandle, end: int, consumed: bytes = b"") -> str:
    """The hash of the ``WINDOW`` bytes before ``end``. ``consumed``, the bytes just read that
    end at ``end``, saves reading them again; only the rest of the window is read."""
    need = min(end, WINDOW)
    if len(consumed) < need:
        consumed = handle.read(end - need, need - len(consumed)) + consumed
    return hashlib.blake2b(consumed[len(consumed) - need:], digest_size=16).hexdigest()


def change(state: FileState, handle: LogHandle, copies: bool = True) -> str | None:
    """Why the file at the state's path is no longer the one read so far, or None.

    Another inode is another file, unless ``copies`` and it holds the very bytes read so far
    (the checks below, which a copy must pass: its first bytes and the ``WINDOW`` before the
    offset): a folder copied or restored with its database, a log rewritten whole and renamed
    over itself. It is read on from the offset, never again as a second attempt."""
    info = handle.info
    moved = state.inode is not None and info.st_ino != state.inode
    if moved and not (copies and state.offset and state.tail):
        return "file_replaced"  # nothing to tell a copy by
    if info.st_size < state.offset:
        return "file_replaced" if moved else "file_truncated"
    if state.tail and state.offset and fingerprint(handle, state.offset) != state.tail:
        return "file_replaced"  # truncated and rewritten past the offset (copytruncate)
    if state.head and (moved or info.st_mtime != state.mtime) \
            and handle.read(0, len(state.head) // 2).hex() != state.head:
        return "file_replaced"  # truncated and rewritten between two looks
    return None


def position(state: FileState, handle: LogHandle, check: bool = True,
             copies: bool = True) -> tuple[FileState, str | None]:
    """A copy of the state to update from this look at the file, reset to offset 0 if it was
    truncated or replaced (not ``check``: a file read whole each time is never reset); with
    the reason. ``copies``: as for ``change``."""
    new = copy.copy(state)
    new.state = "ok"
    reason = change(state, handle, copies) if check else None
    if reason:
        new.offset, new.last_step, new.lines, new.head, new.tail = 0, None, 0, None, None
        new.partial_reported, new.crlf_reported = None, False
    new.inode, new.mtime = handle.info.st_ino, handle.info.st_mtime
    new.grew_at = grown(state, new.mtime)
    return new, reason


def find_inode(folder: Path, inode: int, skip: str) -> str | None:
    """The name of the regular file with ``inode`` in ``folder`` (not ``skip``), if any.
    scandir gives inode numbers without a stat per entry."""
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name != skip and entry.inode() == inode \
                        and entry.is_file(follow_symlinks=False):
                    return entry.name
    except OSError:
        return None
    return None
