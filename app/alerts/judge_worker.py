"""The alert worker: a thread that applies the rules (engine.py) as soon as it is poked (new
lines ingested, incidents stored) and at least once a second without (stalls, `for`
durations, repeats, silences ending). It hands new outbox rows to the delivery worker by
calling ``on_outbox``; it never waits on the network itself::

    alerts = AlertWorker(db, rules, settings, targets(settings), on_outbox=delivery.poke)
    alerts.start(); ingest.listeners.append(alerts.poke); ...; alerts.stop()
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..background import Background
from ..diagnose.rules import Watch

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("cliffwatch.alerts")
TICK_S = 1.0  # timer-driven rules (stall) are judged at least this often
RETRY_S = 2.0  # after a failed pass (logged once per episode)


class AlertWorker(Background):
    what = "alert rules"
    log = log

    def __init__(self, db, rules, settings, targets, on_outbox=None, clock=time.time,
                 source: str | None = None):
        self.rules, self.settings = list(rules), settings
        self.source = source  # where the rules came from, e.g. "runs/alerts.toml (3 rules)"
        self.target_ids = [t.id for t in targets]
        self.on_outbox, self.clock = on_outbox, clock
        self.watch = Watch.of(settings)
        self.engine: Engine | None = None
        self.passes = 0
        super().__init__("cliffwatch-alerts", db)

    def _loop(self) -> None:
        while not self.stopping:
            wait = TICK_S if self._pass() else RETRY_S
            if self.engine is not None and self.engine.behind:
                continue  # a catch-up with more lines to read: no pause
            self.wake.wait(wait)
            self.wake.clear()

    def _engine(self) -> Engine:
        # imported here, in this thread: the engine's pandas (a third of a second of one
        # core) loads while the server already answers, not before it does (issue 23)
        from .engine import Engine

        return Engine(self.db, self.rules, self.target_ids, self.watch, self.clock)

    def _pass(self) -> bool:
        if self.reopened():
            self.engine = None  # its states and marks are read again from the tables
        try:
            if self.engine is None:  # built in this thread: its cursor is this thread's
                self.engine = self._engine()
            queued = self.engine.evaluate(self.clock())
        except Exception as exc:  # the thread must go on
            self.engine = None  # rebuilt from the database at the next pass
            self.failed(exc)
            return False
        self.recovered()
        self.passes += 1
        if queued and self.on_outbox is not None:
            self.on_outbox()
        return True
