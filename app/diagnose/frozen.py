"""A loss that never changes: the run applies no update. Fed the same frames as the detector
(whole run at once, or live tick by tick), it finds the same incident either way::

    Incident(run="stuck", kind="frozen", metric="loss", step=1, end_step=25, value=11.76178,
             baseline=None, causes=["no_update"], evidence=["loss unchanged at 11.76178 over
             25 lines in a row (steps 1-25): ..."])

A real loss moves in its last digits on every line, however flat the run; the same value
bit for bit on ``FROZEN_LINES`` lines in a row means the weights do not change (an optimizer
step skipped after non-finite gradients, a learning rate of 0, frozen parameters). Values with
fewer than ``FROZEN_DIGITS`` significant digits are left alone: a loss printed as 0.0001 repeats
because of its rounding (whisper's 52 lines), not because nothing learns. The longest repeat in
../shared/realdata is 3 lines (issue 19, sweep M2/R5).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .detect import NONFINITE, NOT_METRICS, Incident, Watch

KIND = "frozen"
CAUSE = "no_update"
FROZEN_LINES = 10  # lines in a row with the same value
FROZEN_DIGITS = 3  # significant digits the value must carry


def significant_digits(value: float) -> int:
    """Significant digits of the shortest text that reads back as ``value`` (11.76178 -> 7,
    0.0001 -> 1, 2.0 -> 1)."""
    mantissa = repr(abs(float(value))).split("e")[0].replace(".", "")
    return len(mantissa.strip("0"))


class Repeat:
    """One metric's current run of identical values."""

    def __init__(self) -> None:
        self.value = math.nan
        self.count = 0
        self.first: dict = {}  # step and line ids of the run's first line
        self.before_step: int | None = None  # step of the line logged before the run's first
        self.last_step: int | None = None  # step of the last line that logged the metric
        self.incident: Incident | None = None


class FrozenDetector:
    """Keeps, per loss-like metric, the current run of identical values: a tick costs its
    own lines."""

    def __init__(self, run: str, watch: Watch):
        self.run, self.watch = run, watch
        self.repeats: dict[str, Repeat] = {}
        self.previous_line = -1  # line id of the last line fed (a run's context starts there)

    def feed(self, frame: pd.DataFrame) -> list[Incident]:
        """Judge the new lines; returns the frozen incidents found or grown by them."""
        if frame.empty:
            return []
        changed: dict[tuple, Incident] = {}
        for metric in self._metrics(frame):
            for incident in self._metric(metric, frame):
                changed[incident.key] = incident
        self.previous_line = int(frame["line_id"].iat[-1])
        return list(changed.values())

    def _metrics(self, frame: pd.DataFrame) -> list[str]:
        return [c for c in frame.columns if c not in NOT_METRICS
                and not c.startswith(NONFINITE) and self.watch.diverges(c)]

    def _metric(self, metric: str, frame: pd.DataFrame) -> list[Incident]:
        """The runs of identical values among the new lines that log ``metric``, in one pass
        of numpy (a whole run of a million lines is one batch): only the runs long enough,
        and the last one (it may go on), are looked at one by one."""
        values = frame[metric].to_numpy(dtype=float, na_value=np.nan)
        flag = NONFINITE + metric
        bad = frame[flag].eq(True).to_numpy() if flag in frame else np.zeros(len(values), bool)
        rows = np.flatnonzero(np.isfinite(values) | bad)  # the lines that log the metric
        if not len(rows):
            return []
        value = np.where(bad[rows], np.nan, values[rows])  # NaN never equals: it ends a run
        steps = frame["step"].to_numpy()[rows]
        repeat = self.repeats.setdefault(metric, Repeat())
        with np.errstate(invalid="ignore"):
            starts = np.flatnonzero(np.concatenate([[value[0] != repeat.value],
                                                    value[1:] != value[:-1]]))
        bounds = np.concatenate([starts, [len(value)]])
        changed: list[Incident] = []
        if not len(starts) or starts[0] > 0:  # the first lines go on with the kept run
            repeat.count += int(bounds[0])
            repeat.last_step = int(steps[bounds[0] - 1])
            self._judge(metric, repeat, changed)
        if not len(starts):
            return changed
        self._close(repeat, changed)
        lengths = np.diff(bounds)
        for k in [*np.flatnonzero(lengths[:-1] >= FROZEN_LINES), len(starts) - 1]:
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            before = int(steps[lo - 1]) if lo else repeat.last_step
            repeat = Repeat()
            repeat.value, repeat.count, repeat.before_step = float(value[lo]), hi - lo, before
            repeat.last_step = int(steps[hi - 1])
            repeat.first = self._first(frame, int(rows[lo]))
            self._judge(metric, repeat, changed)
            if k != len(starts) - 1:
                self._close(repeat, changed)
        self.repeats[metric] = repeat
        return changed

    def _first(self, frame: pd.DataFrame, row: int) -> dict:
        ids = frame["line_id"]
        return {"step": int(frame["step"].iat[row]), "line_id": int(ids.iat[row]),
                "from_line_id": int(ids.iat[row - 1]) if row else self.previous_line}

    def _judge(self, metric: str, repeat: Repeat, changed: list) -> None:
        """A run of FROZEN_LINES or more of a value with FROZEN_DIGITS: its incident grows."""
        if repeat.count >= FROZEN_LINES and significant_digits(repeat.value) >= FROZEN_DIGITS:
            changed.append(self._grow(metric, repeat))

    def _close(self, repeat: Repeat, changed: list) -> None:
        """The run of identical values ended: its incident no longer grows."""
        if repeat.incident is not None:
            repeat.incident.open = False
            changed.append(repeat.incident)

    def _grow(self, metric: str, repeat: Repeat) -> Incident:
        incident = repeat.incident
        if incident is None:
            first = repeat.first
            incident = repeat.incident = Incident(
                self.run, KIND, metric, first["step"], first["step"], float(repeat.value),
                None, line_id=first["line_id"], from_line_id=max(first["from_line_id"], 0),
                causes=[CAUSE])
        incident.end_step = repeat.last_step
        incident.open = True
        incident.detail = {"lines": repeat.count, "before_step": repeat.before_step}
        incident.evidence = [evidence(incident)]
        return incident


def evidence(incident: Incident) -> str:
    """What a person reads: the value, the lines, and what it means."""
    lines, steps = incident.detail["lines"], f"steps {incident.step}-{incident.end_step}"
    return (f"{incident.metric} unchanged at {incident.value!r} over {lines} lines in a row "
            f"({steps}): no update is applied (an optimizer step skipped after non-finite "
            "gradients, a learning rate of 0, or frozen parameters) (inferred: the values of "
            "its lines)")


def explain(incidents: list[Incident]) -> list[Incident]:
    """A non-finite incident of the run that ends where a frozen loss begins (or inside it) has
    that frozen loss as its first cause, instead of none: the NaN is why nothing learns.
    Returns the non-finite incidents whose causes changed."""
    frozen = [i for i in incidents if i.kind == KIND]
    changed = []
    for nonfinite in (i for i in incidents if i.kind == "nonfinite"):
        for stuck in frozen:
            # from the line before the frozen value's first (none: the metric's first line, so
            # a NaN before it, at iteration 1 say, led straight to it)
            start = stuck.detail.get("before_step")
            start = -math.inf if start is None else start
            if nonfinite.step <= stuck.end_step and nonfinite.end_step >= start:
                if _first_cause(nonfinite, stuck):
                    changed.append(nonfinite)
                break
    return changed


def _first_cause(nonfinite: Incident, stuck: Incident) -> bool:
    """Put the frozen loss first in ``nonfinite``'s causes; whether that changed them."""
    said = (f"from step {stuck.step} on, {evidence(stuck).split(' (inferred')[0]} "
            "(inferred: the values of its lines)")
    pairs = [(c, e) for c, e in zip(nonfinite.causes, nonfinite.evidence, strict=False)
             if c not in (CAUSE, "unknown")]
    new = [(CAUSE, said), *pairs]
    if list(zip(nonfinite.causes, nonfinite.evidence, strict=False)) == new:
        return False
    nonfinite.causes, nonfinite.evidence = [c for c, _ in new], [e for _, e in new]
    return True
