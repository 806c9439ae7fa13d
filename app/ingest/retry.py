"""What to do on failure: the one retry policy of ingest.

A failure here is never a line's fault (those are recorded and skipped where they are read:
careful.py): the offset stays, the file's row is read back from the database before its next
try (``unsure``), and the work is tried again after its backoff (backoff.py) while the other
files keep going. After running out of memory a file is tried again with half the bytes
(``shrunk``, down to one line), so it progresses whenever anything fits; a database DuckDB has
invalidated stops ingest until a restart (``fatal``)::

    retry = Retry(db, chunk=8 << 20)
    retry.attempt("demo/metrics.jsonl", follow, state)  # its result, or None: failed / waiting
    retry.summary()   # "ingest of demo/metrics.jsonl failing for 12 s: ...; retrying", or None
"""

from __future__ import annotations

import logging

import duckdb

from . import memory
from .backoff import Backoff, describe
from .store import Uncertain

# the server's keeper opens the file again by itself (db/database.py); ingest --once cannot
REOPEN = ("a server opens the database again by itself; `ingest --once` must be run again "
          "(lines not stored yet are read then)")
log = logging.getLogger("cliffwatch.ingest")


class Retry:
    def __init__(self, db, chunk: int):
        self.db, self.chunk = db, chunk  # chunk: a whole read, where a shrunk one grows back
        self.backoff = Backoff()
        self.unsure: set[str] = set()  # keys whose last try raised: reload before reading
        self.dirty = False  # a failure may have left a transaction open on our cursor
        self.tried: dict[str, int] = {}  # path -> bytes of the batch last tried
        self.shrunk: dict[str, int] = {}  # path -> bytes read per tick after out-of-memory
        self.fatal: str | None = None  # the database was invalidated: nothing works until restart

    def attempt(self, key: str, work, *args):
        """``work(*args)``, unless ``key`` is waiting out its backoff (then None). On a failure
        the key (and the files of a COMMIT that raised) are ``unsure``, and None is returned."""
        if not self.backoff.due(key):
            return None
        try:
            if self.dirty:
                self._settle()
            result = work(*args)
        except Exception as exc:  # every failure is retried, none is fatal
            self.dirty = True
            self.unsure.add(key)
            if isinstance(exc, Uncertain):  # those files' rows are read back first
                self.unsure.update(exc.paths)
                exc = exc.__cause__ or exc
            self._failed(key, exc)
            return None
        self.backoff.succeeded(key)
        self.tried.pop(key, None)
        if key in self.shrunk:  # it fit: try a bigger batch next time
            self.shrunk[key] *= 2
            if self.shrunk[key] >= self.chunk:
                del self.shrunk[key]
        return True if result is None else result

    def summary(self, then: bool = True) -> str | None:
        """One line on what is failing and (``then``) how it is retried, or None."""
        return self.fatal or self.backoff.summary(then)

    def _failed(self, key: str, exc: Exception) -> None:
        if memory.fatal(exc):
            if self.fatal is None:
                log.error("ingest stopped: %s; %s", describe(exc), REOPEN)
            self.fatal = (f"ingest failing: the database was invalidated ({describe(exc)}); "
                          f"{REOPEN}")
            return
        if not memory.out_of_memory(exc) or key not in self.tried:
            self.backoff.failed(key, exc)
            return
        tried = self.tried.pop(key)
        if tried <= 1:  # one line already
            self.backoff.failed(key, exc, note="a single line of this file does not fit in "
                                "the memory limit: raise --memory-limit")
            return
        self.shrunk[key] = max(1, tried // 2)
        self.backoff.failed(key, exc, retry="retrying with a smaller batch", soon=True)

    def _settle(self) -> None:
        """End the transaction a failure may have left open (aborted) on this thread's
        cursor. The cursor is rolled back, never closed or dropped: with DuckDB 2.0, closing a
        cursor whose rollback failed crashed the process (segfault) at the next BEGIN; a
        rollback tried again once memory is free succeeds."""
        try:
            self.db.cursor().rollback()
        except duckdb.TransactionException as exc:
            if "no transaction is active" not in str(exc):
                raise
        self.dirty = False
