"""Live diagnosis in the server: a thread that judges new lines soon after they are ingested
and keeps the `incidents` table current (the alert worker reads it)."""

from __future__ import annotations

import logging

from ..background import Background
from .detect import Watch
from .diagnosis import LiveDiagnosis

log = logging.getLogger("cliffwatch.diagnose")
IDLE_S = 2.0  # look again this often even without new rows (a missed wake-up costs nothing)


class DiagnosisWorker(Background):
    what = "live diagnosis"
    log = log

    def __init__(self, db, settings):
        self.watch = Watch(settings.loss_metrics, settings.accuracy_metrics)
        self.live = LiveDiagnosis(db, self.watch)
        self.listeners: list = []  # called (in this thread) after incidents were stored
        super().__init__("cliffwatch-diagnose", db)

    def _loop(self) -> None:
        while not self.stopping:
            if self.reopened():  # judged from the start, as after a restart
                self.live = LiveDiagnosis(self.db, self.watch)
            try:
                changed = self.live.update()
            except Exception as exc:  # the thread must go on
                self.failed(exc)
                changed = 0
            else:
                self.recovered()
            for listener in self.listeners if changed else ():
                listener()
            self.wake.wait(IDLE_S)
            self.wake.clear()
