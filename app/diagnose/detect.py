"""Incident detection over one run's timeline, fed in batches of any size.

Every decision about line ``i`` uses only the ``BASELINE`` lines before it (a spike also the
sudden rises of the ``SPIKE_HISTORY`` lines before it, and for a divergence the best and highest
values of all lines before it) and, for a cliff, the ``CLIFF_STAYS`` lines after it (a divergence
the ``DIVERGE_STAYS`` ones), so feeding a run line by line (live) or all at once (``python -m app
diagnose``) finds the same incidents. An incident looks like::

    Incident(run="seed-cliff", kind="spike", metric="loss", step=2029, end_step=2035,
             value=13.0, baseline=0.75, line_id=1002, from_line_id=997, worst_step=2029)

``step`` is the episode's first line; ``value`` is its worst value (the top of a spike, the
bottom of a cliff) and ``worst_step`` where it was logged.

Thresholds are robust to normal noise: the baseline is the median of the previous 20 lines and
the noise scale their interquartile range, so a 12% wobble or a single 40% slower interval is
not an incident, and a spike must be sudden (a warm-up ramp rises a little every line).

A spike must also stand out from the run's own history. Some metrics are heavy-tailed: a
gradient norm that sits at 0.28 jumps to 0.6-1.0 every thousand steps or so, dozens of noise
scales above its baseline, and a person who sees the whole chart calls that texture, not an
incident. So a spike rises at least ``SPIKE_MARGIN`` times as far above its baseline as the
run's second-largest sudden rise of the previous ``SPIKE_HISTORY`` lines (the second, so that
one earlier spike does not hide the next). On light-tailed noise that bar sits near the 8 noise
scales asked anyway (the second-largest of a few thousand Gaussian rises is about 3 of them),
so it only bites where the run has shown large rises before. The lines of a spike already found
are no texture: their rises leave the yardstick, so every checkpoint that blocks the loop and
throws the loss up the same way is reported each time (issue 19: the seed's second spike, 0.7 ->
7.24 at step 4021, hid behind a first one that rose over two lines).

A divergence needs no history: a loss that climbs to ``DIVERGE_RATIO`` times its best value so far
(and ``DIVERGE_ABOVE`` times the highest before that best: back above where it started, so a
late climb that stays below that is left to the spike rule), then stays there for
``DIVERGE_STAYS`` lines, is one from
the run's second line on, however far apart its lines are (a warm-up divergence logged every 200
steps, 4.66 -> 67.2, lies inside the ``MIN_HISTORY`` lines spikes wait for). A gradient norm's
spike with the loss unmoved is a warning, not a loss incident (``severity``); a burst of them
``BURST`` lines apart is one incident, and one that starts inside a loss spike is part of it.

The detector holds one run's state in rooms, each answering one question: ``recent.py`` the
run's recent lines and where each sits; ``yardstick.py`` a spike's yardstick; ``episodes.py``
the incidents that may still grow; ``stalls.py`` the gaps; ``shifts.py`` spikes, cliffs,
divergences and non-finite values. The thresholds and the ``Incident`` are in ``rules.py``, the
rules over one metric's values in one pass in ``series.py`` (both named here too, as callers
import them from this module).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import shifts
from .episodes import Episodes
from .recent import RecentLines
from .rules import (
    BASELINE,
    BEFORE,
    BURST,
    CLIFF_STAYS,
    CLOCK,
    DIVERGE_ABOVE,
    DIVERGE_RATIO,
    DIVERGE_STAYS,
    GRAD_NORM,
    GRAD_NORM_RATIO,
    LOOKAHEAD,
    MIN_BASELINE,
    MIN_HISTORY,
    NONFINITE,
    NOT_METRICS,
    PRIVATE,
    SCHEDULE,
    SPIKE_HISTORY,
    SQL_PARAMS,
    STALL_RATIO,
    TWO_WRITERS,
    Incident,
    Watch,
    is_grad_norm,
    is_schedule,
    severity_of,
)
from .series import (
    best_and_high,
    divergence_mask,
    local_shift,
    noise_scale,
    rises,
    shift_mask,
    trailing_iqr,
    trailing_median,
    usual_rise,
)
from .stalls import Stalls, two_writers
from .yardstick import SpikeYardstick

__all__ = [  # callers import the rules' names from here
    "BASELINE", "BEFORE", "BURST", "CLIFF_STAYS", "CLOCK", "DIVERGE_ABOVE", "DIVERGE_RATIO",
    "DIVERGE_STAYS", "GRAD_NORM", "GRAD_NORM_RATIO", "LOOKAHEAD", "MIN_BASELINE", "MIN_HISTORY",
    "NONFINITE", "NOT_METRICS", "PRIVATE", "SCHEDULE", "SPIKE_HISTORY", "SQL_PARAMS",
    "STALL_RATIO", "TWO_WRITERS", "Incident", "RunDetector", "Watch", "best_and_high",
    "divergence_mask", "is_grad_norm", "is_schedule", "local_shift", "noise_scale", "rises",
    "severity_of", "shift_mask", "trailing_iqr", "trailing_median", "usual_rise"]


class RunDetector:
    """Keeps just enough of one run's recent lines to judge the next ones."""

    def __init__(self, run: str, watch: Watch):
        self.run, self.watch = run, watch
        self.lines = RecentLines()
        self.frontier = dict.fromkeys(LOOKAHEAD, 0)  # first undecided line per kind
        self.yardstick = SpikeYardstick()
        self.episodes = Episodes(self.lines, self.yardstick)
        self.stalls = Stalls()
        # per diverging metric, its best and worst finite value before the divergence frontier
        self.extremes: dict[str, tuple[float, float]] = {}

    @property
    def frame(self) -> pd.DataFrame:
        return self.lines.frame

    @property
    def rise_base(self) -> int:
        return self.yardstick.base

    def feed(self, batch: pd.DataFrame, evaluated=None) -> list[Incident]:
        """Judge the new lines; returns incidents found or grown by them. ``evaluated(lo, hi)``:
        whether the run logged an evaluation row at a step from lo to below hi (load.evaluated;
        None: no evaluation rows are known)."""
        if batch.empty:
            return []
        two = self.lines.append(batch)
        n = self.lines.end
        changed = self.episodes.grow(n) + two_writers(self.run, self.lines, two)
        changed += self.stalls.judge(self, n, evaluated)
        for metric in self.lines.metrics():
            changed += self._judge(metric, n)
        for kind, ahead in LOOKAHEAD.items():
            self.frontier[kind] = max(self.frontier[kind], n - ahead)
        undecided = min(self.frontier.values())
        self.lines.trim(undecided)
        self.yardstick.trim(undecided)
        return changed

    def _judge(self, metric: str, n: int) -> list[Incident]:
        """One metric's new lines, by the rules its kind takes."""
        kind = self.watch.kind_of(metric)
        found = []
        if kind == "spike":
            found += shifts.spikes(self, metric, n)
        elif kind:
            found += shifts.level_shift(self, kind, metric, n)
        if self.watch.diverges(metric):
            found += shifts.divergence(self, metric, n)
        if kind and self.lines.has_nonfinite(metric):  # a watched one: a NaN elsewhere (a
            # timing average's 0/0 before it has a step, as modded-nanogpt's step_avg) is
            # the nonfinite alert rule's business, with its own metric globs
            found += shifts.nonfinite(self, metric, n)
        return found

    def candidates(self, kind: str, mask: np.ndarray, n: int, ahead: int) -> np.ndarray:
        """The lines of ``mask`` (frame rows) from ``kind``'s frontier to ``ahead`` lines
        before ``n``, as line numbers."""
        base = self.lines.base
        start = self.frontier[kind] - base
        stop = n - ahead - base
        hits = np.flatnonzero(mask[max(start, 0):max(stop, 0)]) + max(start, 0)
        return hits + base
