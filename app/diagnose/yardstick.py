"""A spike's yardstick: the sudden rises of a metric's past lines (series.rises), kept from
``base`` on so that a tick computes only its new lines', and the lines of the spikes found,
whose rises are no texture and leave it."""

from __future__ import annotations

import numpy as np

from .rules import BASELINE, SPIKE_HISTORY, SQL_PARAMS, is_grad_norm
from .series import rises, trailing_median, usual_rise


class SpikeYardstick:
    """Per spike metric, the rise of each line from ``base`` on (a spike's yardstick reads
    SPIKE_HISTORY lines back, the frame only BASELINE), and the [first, last] lines of its
    spikes' episodes (``quiet``: their rises are no texture, and no divergence starts inside
    one: it is that spike)."""

    def __init__(self):
        self.rises: dict[str, np.ndarray] = {}
        self.base = 0
        self.quiet: dict[str, list[list[int]]] = {}

    def rise(self, metric: str, values: np.ndarray, frame_base: int) -> np.ndarray:
        """The rises of ``metric`` from base on, the frame's new lines' computed now (from
        them and the baseline's lines before them; ``values``: the frame's, whose first line
        is ``frame_base``). A metric first seen now had no value before the frame's lines (its
        column came with them)."""
        known = self.rises.get(metric)
        if known is None:
            known = np.full(frame_base - self.base, np.nan)
        new = self.base + len(known) - frame_base  # frame row of the first line not known
        if new < len(values):
            first = max(0, new - BASELINE - 1)
            part = np.where(np.isfinite(values[first:]), values[first:], np.nan)
            rules = SQL_PARAMS["spikes"]
            rise = rises(part, trailing_median(part, rules["window"], rules["min_lines"]),
                         rules["sudden"])
            known = np.concatenate([known, rise[new - first:]])
        self.rises[metric] = known
        self._hush(metric)
        return known

    def bar(self, metric: str, line: int, rules: dict) -> float:
        """How far a spike at ``line`` must rise: ``margin`` times the usual rise before it
        (NaN: no yardstick yet)."""
        return rules["margin"] * usual_rise(self.rises[metric], np.array([line - self.base]),
                                            rules)[0]

    def _hush(self, metric: str) -> None:
        """No rise of a line inside a spike's episode is texture: it leaves the yardstick."""
        known = self.rises.get(metric)
        for lo, hi in self.quiet.get(metric, ()):
            if known is not None:
                known[max(lo - self.base, 0):max(hi + 1 - self.base, 0)] = np.nan

    def hush(self, metric: str, lo: int, hi: int) -> None:
        """Lines ``lo`` to ``hi`` belong to a spike: their rises leave the yardstick."""
        ranges = self.quiet.setdefault(metric, [])
        if ranges and ranges[-1][1] >= lo - 1:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
        self._hush(metric)

    def in_spike(self, metric: str, line: int) -> bool:
        return any(lo <= line <= hi for lo, hi in self.quiet.get(metric, ()))

    def in_loss_spike(self, line: int) -> bool:
        """Whether a spike of a loss-like metric other than a gradient norm holds ``line``."""
        return any(lo <= line <= hi for metric, ranges in self.quiet.items()
                   if not is_grad_norm(metric) for lo, hi in ranges)

    def trim(self, undecided: int) -> None:
        """Keep the rises SPIKE_HISTORY lines before the first line not decided yet (kept, not
        computed again, so a tick costs what its lines do)."""
        drop = undecided - SPIKE_HISTORY - self.base
        if drop > 0:
            self.rises = {m: rise[drop:] for m, rise in self.rises.items()}
            self.base += drop
            self.quiet = {m: [r for r in ranges if r[1] >= self.base]
                          for m, ranges in self.quiet.items()}
