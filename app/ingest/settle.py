"""How much of what was read is complete: whole lines, or for a TensorBoard file whole
records up to the last step's, which is held until the file has settled (the rest of that
step's scalars may still be coming)::

    complete(state, b'{"step": 1}\n{"st', 0, None, mtime)   -> 12
"""

from __future__ import annotations

import time

from .filestate import FileState

SETTLE_S = 0.4  # a TensorBoard file's last step is stored once the file is this still


def settled(pending) -> bool:
    """Whether the unfinished end held since ``pending.since`` has been still long enough."""
    return time.monotonic() - pending.since >= SETTLE_S


def complete(state: FileState, data: bytes, base: int, pending, mtime: float) -> int:
    """The complete bytes of ``data`` (read from ``base``). A file last written SETTLE_S or
    more ago has settled already: a closed or copied file's last step is read at once, where
    ``ingest --once`` would never come back for it (it kept every file's last step)."""
    if state.kind != "tfevents":
        return data.rfind(b"\n") + 1
    from .formats import tfevents  # protobuf: only for TensorBoard files

    done = (pending is not None and settled(pending)) or time.time() - mtime >= SETTLE_S
    return tfevents.read(data, base, final=done).consumed
