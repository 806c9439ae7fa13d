"""Files that are gone or refused: what the tailer records, once, when a tracked file is no
longer there (deleted, or renamed away by a rotation) or may not be read (openfile.py's
``Refused``: permissions, a link out of the log directory, not a regular file)::

    gone.vanished(store, state, renamed="metrics.jsonl.1")   # a warning row, state "deleted"
    gone.refuse(store, state, refused)                        # its reason, its state
"""

from __future__ import annotations

import copy

from .filestate import FileState
from .openfile import Refused
from .parse import Problem
from .store import Store


def vanished(store: Store, state: FileState, renamed: str | None) -> None:
    if state.state == "deleted":
        return
    new = copy.copy(state)
    new.state = "deleted"
    if renamed:
        reason = (f"file renamed to {renamed} (rotated); read to its end, {state.offset} "
                  "bytes; a new file under the old name is read from its start")
    else:
        reason = f"file deleted; {state.offset} of {state.size} bytes had been read"
    store.record(state, new, Problem(state.offset, "warning", reason))


def refuse(store: Store, state: FileState, refused: Refused) -> None:
    """Record once why a file is not read (no excerpt: it may not be ours to show)."""
    if state.state == refused.state:
        return
    new = copy.copy(state)
    new.state = refused.state
    store.record(state, new, Problem(state.offset, refused.severity, refused.message))
