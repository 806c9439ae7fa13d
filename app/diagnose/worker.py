"""Live diagnosis in the server: a thread that judges new lines soon after they are ingested
and keeps the `incidents` table current (the alert worker reads it)."""

from __future__ import annotations

import logging
import threading

from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis

log = logging.getLogger("cliffwatch.diagnose")
IDLE_S = 2.0  # look again this often even without new rows (a missed wake-up costs nothing)


class DiagnosisWorker:
    def __init__(self, db, settings):
        self.live = LiveDiagnosis(db, Watch(settings.loss_metrics, settings.accuracy_metrics))
        self.wake, self.stopping = threading.Event(), False
        self.listeners: list = []  # called (in this thread) after incidents were stored
        self.thread = threading.Thread(target=self._loop, name="cliffwatch-diagnose",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def poke(self) -> None:
        """New rows arrived (called from the ingest thread; never blocks it)."""
        self.wake.set()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()
        self.thread.join(timeout=10)

    def _loop(self) -> None:
        while not self.stopping:
            try:
                changed = self.live.update()
            except Exception:
                log.exception("live diagnosis failed; retrying")
                changed = 0
            for listener in self.listeners if changed else ():
                listener()
            self.wake.wait(IDLE_S)
            self.wake.clear()
