"""Per-file retry with backoff, and the one-line account of what is failing.

A resource error (out of memory, an aborted transaction, a full disk) says nothing about the
line being stored, so the file keeps its offset and is tried again after 0.5 s, 1 s, 2 s ... up
to 30 s, while the other files keep going. One log line marks the start of an episode and one
its end (issue 7 saw 789 tracebacks in 25 s); ``summary()`` is what /api/health shows::

    ingest of demo/metrics.jsonl failing for 12 s: OutOfMemoryException: Out of Memory
    Error: ...; retrying
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import duckdb

log = logging.getLogger("cliffwatch.ingest")
FIRST_DELAY_S, MAX_DELAY_S = 0.5, 30.0


@dataclass
class Episode:
    since: float  # time.monotonic() of the first failure
    error: str  # what failed, and any advice ("...; raise --memory-limit")
    retry: str = "retrying"  # how it is tried next ("retrying with a smaller batch")
    tries: int = 1
    delay: float = FIRST_DELAY_S
    next_try: float = 0.0


def describe(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class Backoff:
    def __init__(self) -> None:
        self.failing: dict[str, Episode] = {}

    def due(self, key: str) -> bool:
        episode = self.failing.get(key)
        return episode is None or time.monotonic() >= episode.next_try

    def failed(self, key: str, exc: BaseException, note: str = "", retry: str = "retrying",
               soon: bool = False) -> None:
        """Record a failure of ``key``: ``note`` (advice) is added to what health shows, and
        ``retry``, how it is tried next; ``soon`` (the work will be tried smaller) keeps the
        first, short delay."""
        now = time.monotonic()
        episode = self.failing.get(key)
        error = describe(exc) + (f"; {note}" if note else "")
        if episode is None:
            episode = self.failing[key] = Episode(now, error, retry)
            # a database error is expected under load; anything else is a bug worth a traceback
            log.warning("ingest of %s failing: %s; retrying with backoff", key, episode.error,
                        exc_info=not isinstance(exc, duckdb.Error))
        else:
            episode.tries += 1
            episode.error, episode.retry = error, retry
            episode.delay = FIRST_DELAY_S if soon else min(episode.delay * 2, MAX_DELAY_S)
        episode.next_try = now + episode.delay

    def succeeded(self, key: str) -> None:
        episode = self.failing.pop(key, None)
        if episode is not None:
            log.warning("ingest of %s recovered after %.0f s and %d failed tries", key,
                        time.monotonic() - episode.since, episode.tries)

    def summary(self, then: bool = True) -> str | None:
        """One line saying what is failing, or None when ingest is healthy; with how it is
        retried unless not ``then`` (a one-shot run retries nothing more)."""
        failing = list(self.failing.items())  # one atomic copy: the ingest thread writes it
        if not failing:
            return None
        key, episode = min(failing, key=lambda item: item[1].since)
        others = len(failing) - 1
        more = f" (and {others} more file{'s' if others > 1 else ''})" if others else ""
        retry = f"; {episode.retry}" if then else ""
        return (f"ingest of {key}{more} failing for {time.monotonic() - episode.since:.0f} s: "
                f"{episode.error}{retry}")
