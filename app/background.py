"""A daemon thread that works in a loop and can be woken early: the shape of the server's
diagnosis, tile and alert workers::

    class Worker(Background):
        what = "live diagnosis"           # how health and the log name it
        def _loop(self):
            while not self.stopping:
                if self.reopened():
                    ...                   # the database was opened again: reload from it
                try:
                    ...                   # one pass
                except Exception as exc:
                    self.failed(exc)      # logged once per episode, shown by `failure`
                else:
                    self.recovered()      # one line when an episode ends
                self.wake.wait(2.0)       # until poke() or the timeout
                self.wake.clear()

``failure`` is what /api/health shows while passes fail::

    "live diagnosis failing for 12 s: IOException: Could not write file ...; retrying"
"""

from __future__ import annotations

import logging
import threading
import time

import duckdb

from .db.database import DatabaseLost
from .db.loss import damaged, rebuild_advice
from .errors import CliffwatchError
from .ingest.backoff import describe


class Background:
    what = "background work"
    log = logging.getLogger("cliffwatch")

    def __init__(self, name: str, db=None):
        self.wake, self.stopping = threading.Event(), False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.db = db
        self.generation = getattr(db, "generation", 0)  # the opening its state was read from
        # (time.monotonic() since, the last error, whether the log said it)
        self.failing: tuple[float, str, bool] | None = None

    def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self.thread.start()

    def poke(self) -> None:
        """Something changed (called from other threads; never blocks them)."""
        self.wake.set()

    def stop_soon(self) -> None:
        """Ask the loop to end after its pass, without waiting (the server asks every worker
        first, then waits for each: they wind down together, not one after another)."""
        self.stopping = True
        self.wake.set()

    def stop(self) -> None:
        self.stop_soon()
        self.thread.join(timeout=10)

    def reopened(self) -> bool:
        """True, once, after the database was opened again (what this worker keeps in memory
        came from the old opening and must be read again from the tables)."""
        db = self.db
        if db is None or db.generation == self.generation or db.lost is not None:
            return False
        self.generation = db.generation
        return True

    def failed(self, exc: Exception) -> None:
        """A pass failed: said once per episode (with a traceback only when the failure is
        not the database's, i.e. a bug), then only counted (issue 18 saw 140 tracebacks in
        10 s while the disk was full). A pass cut short by the server's stop (its statement
        interrupted, the database closed) is no failure: nothing is retried."""
        if self.stopping:
            return
        if self.db is not None:
            self.db.suspect(exc)  # an invalidated database: its keeper looks at once
        if isinstance(exc, DatabaseLost):  # the database says why, once, for every worker
            error, told = "waiting for the database to be opened again (see database_error)", False
        else:
            error, told = describe(exc), True
        if self.failing is None:
            if told:
                self.log.warning("%s failing: %s; retrying (said once until it recovers)",
                                 self.what, error,
                                 exc_info=not isinstance(exc, duckdb.Error | CliffwatchError))
            self.failing = (time.monotonic(), error, told)
        else:
            self.failing = (self.failing[0], error, self.failing[2])

    def recovered(self) -> None:
        failing = self.failing
        if failing is not None:
            self.failing = None
            if failing[2]:
                self.log.warning("%s recovered after %.0f s", self.what,
                                 time.monotonic() - failing[0])

    @property
    def failure(self) -> str | None:
        """One line on what is failing and being retried, or None when healthy."""
        failing = self.failing
        if failing is None:
            return None
        since, error, _ = failing
        advice = f"; {rebuild_advice()}" if damaged(error) else ""
        return (f"{self.what} failing for {time.monotonic() - since:.0f} s: {error}; "
                f"retrying{advice}")
