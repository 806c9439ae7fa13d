"""Live diagnosis in the server: a thread that judges new lines soon after they are ingested
and keeps the `incidents` table current (the alert worker reads it). It starts from the marks
a server stored before (marks.py), stores them every few seconds while lines come and once more
when it stops, so a restarted server judges only what was stored since."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..background import Background
from .rules import Watch

if TYPE_CHECKING:
    from .diagnosis import LiveDiagnosis

log = logging.getLogger("cliffwatch.diagnose")
IDLE_S = 2.0  # look again this often even without new rows (a missed wake-up costs nothing)


class DiagnosisWorker(Background):
    what = "live diagnosis"
    log = log

    def __init__(self, db, settings):
        self.watch = Watch.of(settings)
        self.live: LiveDiagnosis | None = None  # read from the marks in this thread
        self.listeners: list = []  # called (in this thread) after incidents were stored
        super().__init__("cliffwatch-diagnose", db)

    def _loop(self) -> None:
        # imported here, in this thread: the diagnosis's pandas (a third of a second of one
        # core) loads while the server already answers, not before it does (issue 23)
        from . import marks
        from .diagnosis import LiveDiagnosis

        while not self.stopping:
            if self.reopened():  # resumed from the stored marks, as after a restart
                self.live = None
            try:
                if self.live is None:
                    self.live = LiveDiagnosis(self.db, self.watch, resume=True)
                    self.live.stopping = lambda: self.stopping
                changed = self.live.update()
                self.live.save()
            except marks.StateRefused as exc:  # judged from the start; the incidents found
                # again are stored in place
                log.warning("live diagnosis: %s; judging every run from the start", exc)
                self.live, changed = LiveDiagnosis(self.db, self.watch), 0
                self.live.stopping = lambda: self.stopping
            except Exception as exc:  # the thread must go on
                self.failed(exc)
                changed = 0
            else:
                self.recovered()
            for listener in self.listeners if changed else ():
                listener()
            self.wake.wait(IDLE_S)
            self.wake.clear()
        self._save_at_stop()

    def _save_at_stop(self) -> None:
        """What was judged since the last save, so the next server starts there."""
        try:
            if self.live is not None and self.db.lost is None:
                self.live.save(force=True)
        except Exception as exc:  # the next server judges those lines again: no loss
            log.warning("live diagnosis: marks not stored at stop (%s: %s); the next start "
                        "judges the lines since the last save again", type(exc).__name__, exc)
