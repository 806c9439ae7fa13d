"""The rules that judge one metric's newest lines, each a function of the run's detector:
spikes (a yardstick from the run's own rises, a gradient norm's bursts), cliffs (a level that
falls and stays down), divergences (far above the best value so far) and non-finite values.
Each finds the lines from its kind's frontier on and hands each incident to the detector's
episodes to grow."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .rules import (
    BASELINE,
    DIVERGE_STAYS,
    LOOKAHEAD,
    NONFINITE,
    SQL_PARAMS,
    Incident,
    is_grad_norm,
)
from .series import divergence_mask, local_shift, shift_mask

if TYPE_CHECKING:
    from .detect import RunDetector


def _incident(detector: RunDetector, kind: str, metric: str, line: int, value: float,
              baseline: float | None, **more) -> Incident:
    step = detector.lines.step(line)
    return Incident(detector.run, kind, metric, step, step, value, baseline,
                    **detector.lines.context(line), **more)


def spikes(detector: RunDetector, metric: str, n: int) -> list[Incident]:
    """The spike rule line by line in the order logged: a spike found takes its lines out
    of the yardstick of the lines after it, in this batch as in later ones."""
    lines, episodes, yardstick = detector.lines, detector.episodes, detector.yardstick
    rules = SQL_PARAMS["grad_norm_spikes" if is_grad_norm(metric) else "spikes"]
    values = lines.values(metric)
    start = max(0, detector.frontier["spike"] - lines.base)  # the lines not judged yet
    yardstick.rise(metric, values, lines.base)  # kept, with the lines of spikes found left out
    values, median, threshold, ok = local_shift("spike", values, rules, start)
    with np.errstate(invalid="ignore"):
        ok &= values - median > threshold
    found: list[Incident] = []
    for line in detector.candidates("spike", ok, n, 0):
        if episodes.inside("spike", metric, line):
            continue
        p = lines.pos(line)
        bar = yardstick.bar(metric, line, rules)
        height = max(threshold[p], bar) if np.isfinite(bar) else threshold[p]
        if not values[p] - median[p] > height:
            continue
        within = is_grad_norm(metric) and yardstick.in_loss_spike(line)
        incident = episodes.burst(metric, line, within)
        if incident is None:
            incident = _incident(detector, "spike", metric, line, float(values[p]),
                                 float(median[p]), within=within)
        incident.level = float(median[p] + 0.5 * height)
        episodes.extend(incident, n)
        if not incident.within and all(i is not incident for i in found):
            found.append(incident)
    return found


def level_shift(detector: RunDetector, kind: str, metric: str, n: int) -> list[Incident]:
    """Lines from the kind's frontier on beyond its threshold (shift_mask): for a cliff, one
    that falls and stays down CLIFF_STAYS lines."""
    lines, episodes = detector.lines, detector.episodes
    values = lines.values(metric)
    start = max(0, detector.frontier[kind] - lines.base)  # the lines not judged yet
    rise = detector.yardstick.rise(metric, values, lines.base) if kind == "spike" else None
    values, mask, median, level = shift_mask(kind, values, start=start, rise=rise,
                                             rise_at=lines.base - detector.yardstick.base)
    found = []
    for line in detector.candidates(kind, mask, n, LOOKAHEAD[kind]):
        if episodes.inside(kind, metric, line):
            continue
        p = lines.pos(line)
        incident = _incident(detector, kind, metric, line, float(values[p]), float(median[p]),
                             level=float(level[p]))
        episodes.extend(incident, n)
        found.append(incident)
    return found


def divergence(detector: RunDetector, metric: str, n: int) -> list[Incident]:
    """Lines from the divergence frontier on at DIVERGE_RATIO times the best finite value
    before them (a positive one) and DIVERGE_ABOVE times the highest before that best,
    where each of the next DIVERGE_STAYS lines that logs the metric stays there (a
    non-finite value counts: a diverged loss ends in NaN) and one at least does."""
    lines, episodes = detector.lines, detector.episodes
    start = detector.frontier["divergence"] - lines.base
    values = lines.values(metric)[start:]
    bad = (lines.frame[NONFINITE + metric].eq(True).to_numpy()[start:]
           if lines.has_nonfinite(metric) else np.zeros(len(values), dtype=bool))
    values = np.where(bad, np.nan, values)  # NaN: not finite or not logged
    hit, best, level, state = divergence_mask(values, bad, detector.extremes.get(metric))
    done = max(0, len(values) - DIVERGE_STAYS)  # the lines decided now
    detector.extremes[metric] = state(done)  # ... whose values the next lines' bars include
    found = []
    for i in np.flatnonzero(hit[:done]):
        line = lines.base + start + int(i)
        if episodes.inside("divergence", metric, line) or detector.yardstick.in_spike(
                metric, line):
            continue
        incident = _incident(detector, "divergence", metric, line, float(values[i]),
                             float(best[i]), level=float(level[i]))
        episodes.extend(incident, n)
        found.append(incident)
    return found


def nonfinite(detector: RunDetector, metric: str, n: int) -> list[Incident]:
    """Lines whose value is NaN or infinite, with the last finite value before as baseline."""
    lines, episodes = detector.lines, detector.episodes
    values = lines.frame[metric].astype("float64")
    bad = lines.frame[NONFINITE + metric].eq(True).to_numpy()
    found = []
    for line in detector.candidates("nonfinite", bad, n, 0):
        if episodes.inside("nonfinite", metric, line):
            continue
        p = lines.pos(line)
        recent = values.iloc[max(0, p - BASELINE):p]
        finite = recent[np.isfinite(recent)]
        incident = _incident(detector, "nonfinite", metric, line, float(values.iat[p]),
                             float(finite.iat[-1]) if len(finite) else None)
        episodes.extend(incident, n)
        found.append(incident)
    return found
