"""Stalls: gaps between lines STALL_RATIO times the typical one, an evaluation pause judged
against the run's earlier pauses; and the finding that two processes print one log, whose
intervals are then read per process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import keys
from .rules import (
    BASELINE,
    CLOCK,
    EVAL_HISTORY,
    STALL_MIN_EXCESS_S,
    STALL_QUANTILE,
    STALL_RATIO,
    TWO_WRITERS,
    Incident,
)
from .series import finite, trailing_median

if TYPE_CHECKING:
    from .detect import RunDetector
    from .recent import RecentLines


class Stalls:
    """The stall rule over a run's newest lines, with the evaluation pauses seen so far."""

    def __init__(self):
        self.pauses: list[float] = []  # the last EVAL_HISTORY evaluation pauses (seconds)

    def judge(self, detector: RunDetector, n: int, evaluated) -> list[Incident]:
        """Gaps STALL_RATIO times the typical one. A gap that held an evaluation pass (an
        evaluation row at a step from the line before's, the step a trainer logs before it
        evaluates, to below its own) is an evaluation pause: judged again against the run's
        earlier pauses, as a person reads a routine evaluation every N steps."""
        lines = detector.lines
        frame = lines.frame
        if CLOCK not in frame or frame[CLOCK].isna().all():
            return []
        attempt = frame["attempt"].to_numpy()
        steps = frame["step"].to_numpy(dtype=float)
        same = np.concatenate([[False], attempt[1:] == attempt[:-1]])
        dt = np.where(same, lines.interval, np.nan)
        dsteps = np.where(same, np.diff(steps, prepend=np.nan), np.nan)
        typical = trailing_median(dt)
        with np.errstate(invalid="ignore"):
            mask = (dt > STALL_RATIO * typical) & (dt - typical > STALL_MIN_EXCESS_S)
        # the quantile is at or above the median: only a gap that stands out from the median
        # can stand out from it, and only for those is it computed (a rolling quantile over a
        # whole run costs ten times the median's)
        for p in np.flatnonzero(mask):
            typical[p] = np.quantile(finite(dt[max(p - BASELINE, 0):p]), STALL_QUANTILE)
        with np.errstate(invalid="ignore"):
            mask &= (dt > STALL_RATIO * typical) & (dt - typical > STALL_MIN_EXCESS_S)
        found = []
        for line in detector.candidates("stall", mask, n, 0):
            p = lines.pos(line)
            baseline = self._pause_baseline(steps, p, float(dt[p]), float(typical[p]),
                                            evaluated)
            if baseline is None:
                continue
            found.append(Incident(
                detector.run, "stall", keys.GAP, lines.step(line), lines.step(line),
                float(dt[p]), baseline, **lines.context(line),
                # the training's typical gap, also when the yardstick is an evaluation's
                detail={"steps": int(dsteps[p]), "typical_s": float(typical[p])}))
        return found

    def _pause_baseline(self, steps: np.ndarray, p: int, gap: float, typical: float,
                        evaluated) -> float | None:
        """The yardstick of the gap before line ``p``, or None when it is no stall: the training
        gaps' for a training gap; for an evaluation pause the median of the EVAL_HISTORY pauses
        before it (the run's first has none: the training gaps'). Candidates come once each,
        in order, so batches of any size give the same yardsticks."""
        if evaluated is None or not evaluated(int(steps[p - 1]), int(steps[p])):
            return typical
        usual = float(np.median(self.pauses[-EVAL_HISTORY:])) if self.pauses else typical
        self.pauses = [*self.pauses[-EVAL_HISTORY + 1:], gap]
        if gap > STALL_RATIO * usual and gap - usual > STALL_MIN_EXCESS_S:
            return usual
        return None


def two_writers(run: str, lines: RecentLines, line: int | None) -> list[Incident]:
    """Said once per run: what explains its repeated steps, and why its intervals are read
    per process."""
    if line is None:
        return []
    step = lines.step(line)
    said = (f"two processes write this log: from step {step} on its steps come twice, each "
            "copy with its own clock (two ranks printing, or a relaunch while the old "
            "process still ran); intervals are judged per process and a repeated step "
            "starts no attempt (inferred: the steps and clocks of its lines)")
    return [Incident(run, TWO_WRITERS, "step", step, step, 2.0, None,
                     causes=[TWO_WRITERS], evidence=[said], **lines.context(line))]
