"""The rules over one metric's values in one pass, array in, array out: the trailing baseline
and noise scale, the spike and cliff shape, a spike's yardstick, the divergence rule. The
detector (detect.py) applies them to a run's newest lines; the tests and the named queries'
checks to whole runs."""

from __future__ import annotations

import bottleneck as bn
import numpy as np
import pandas as pd

from .rules import BASELINE, MIN_BASELINE, SQL_PARAMS


def trailing_median(values: np.ndarray, window: int = BASELINE,
                    min_lines: int = MIN_BASELINE) -> np.ndarray:
    """Median of the ``window`` values before each position, skipping NaN; NaN until
    ``min_lines`` values are there."""
    if not len(values):
        return values
    window = min(window, len(values))  # bottleneck wants window <= length; same medians
    moving = bn.move_median(values, window, min_count=min(min_lines, window))
    present = np.isfinite(values).astype(np.float64)  # bottleneck is slow on bool arrays
    moving = np.where(bn.move_sum(present, window, min_count=1) >= min_lines, moving, np.nan)
    return np.concatenate([[np.nan], moving[:-1]])


def finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def trailing_iqr(values: np.ndarray, window: int) -> np.ndarray:
    """Interquartile range of the ``window`` values before each position (NaN skipped)."""
    rolling = pd.Series(values).rolling(window, min_periods=1)
    iqr = (rolling.quantile(0.75) - rolling.quantile(0.25)).to_numpy()
    return np.concatenate([[np.nan], iqr[:-1]])


def noise_scale(values: np.ndarray, median: np.ndarray, rules: dict) -> np.ndarray:
    """A robust noise scale, the larger of two standard-deviation estimates: the trailing
    median of line-to-line changes (1.4826 / sqrt(2) of it, for white noise) and the trailing
    interquartile range (/ 1.349). The first alone is small by chance now and then in pure noise
    (a few short changes in a row); the second alone is large on a trend. At least ``floor`` of
    the level; NaN (no verdict) until enough changes are known."""
    jumps = trailing_median(np.abs(np.diff(values, prepend=np.nan)), rules["window"],
                            rules["min_lines"])
    spread = trailing_iqr(values, rules["window"]) / 1.349
    return np.maximum(np.maximum(jumps * (1.4826 / np.sqrt(2.0)), spread),
                      rules["floor"] * np.abs(median))


def rises(values: np.ndarray, median: np.ndarray, sudden: float) -> np.ndarray:
    """Each line's sudden rise: how far it is above its baseline, where at least ``sudden`` of
    that arrived in one line (as a spike's must); NaN on every other line."""
    excess = values - median
    with np.errstate(invalid="ignore"):
        rose = (excess > 0) & (np.diff(values, prepend=np.nan) > sudden * excess)
    return np.where(rose, excess, np.nan)


def usual_rise(rise: np.ndarray, lines: np.ndarray, rules: dict) -> np.ndarray:
    """The yardstick at each of ``lines``: the ``rank``-th largest rise of the ``history`` lines
    before it (NaN with fewer rises: no yardstick yet). Only a candidate needs it, so it is
    computed line by line, not rolled over the whole run."""
    history, rank = int(rules["history"]), int(rules["rank"])
    out = np.full(len(lines), np.nan)
    for i, line in enumerate(lines):
        past = rise[max(0, line - history):line]
        past = past[~np.isnan(past)]
        if len(past) >= rank:
            out[i] = np.partition(past, len(past) - rank)[len(past) - rank]
    return out


def shift_mask(kind: str, values: np.ndarray, rules: dict | None = None, start: int = 0,
               rise: np.ndarray | None = None, rise_at: int = 0) -> tuple:
    """The spike (up) or cliff (down) rule for every line of one metric: (values with
    non-finite as NaN, whether the line is beyond the threshold, the baseline, and the level
    the episode lasts beyond). ``rules``: SQL_PARAMS["spikes"] or ["cliffs"] (the default).
    Only lines from ``start`` on are judged (the others read as not beyond): the rule reads
    ``window`` lines back, and for a spike ``history`` lines of ``rise`` (rises(); computed
    here when not given), so a caller that judges a run's newest lines passes what it kept,
    with the index in ``rise`` of ``values``' first line (``rise_at``). This is the rule in
    one pass, as the named queries apply it; the detector also takes a spike's own lines out
    of the rises later lines are measured against (shifts.spikes)."""
    rules = rules or SQL_PARAMS["spikes" if kind == "spike" else "cliffs"]
    values, median, threshold, ok = local_shift(kind, values, rules, start)
    sign = 1.0 if kind == "spike" else -1.0  # spikes go up, cliffs go down
    with np.errstate(invalid="ignore"):
        if kind == "spike":  # the bar the run's history sets, where the rest is met
            lines = np.flatnonzero(ok & (values - median > threshold))
            if len(lines):
                if rise is None:
                    rise = rises(values, trailing_median(values, rules["window"],
                                                         rules["min_lines"]), rules["sudden"])
                bar = rules["margin"] * usual_rise(rise, lines + rise_at, rules)
                threshold[lines] = np.fmax(threshold[lines], bar)
        mask = ok & (sign * (values - median) > threshold)
    return values, mask, median, median + sign * 0.5 * threshold


def local_shift(kind: str, values: np.ndarray, rules: dict, start: int = 0) -> tuple:
    """The spike or cliff rule without the bar a run's history sets: (values with non-finite
    as NaN, baseline, threshold, whether the line has the shape: sudden, or staying down), for
    the lines from ``start`` on (earlier ones read as not judged)."""
    values = np.where(np.isfinite(values), values, np.nan)
    first = max(0, start - int(rules["window"]) - 1)  # the lines the rule reads back
    median, threshold = np.full(len(values), np.nan), np.full(len(values), np.nan)
    ok = np.zeros(len(values), dtype=bool)
    median[first:], threshold[first:], ok[first:] = _local_rule(kind, values[first:], rules)
    ok[:start] = False
    return values, median, threshold, ok


def _local_rule(kind: str, values: np.ndarray, rules: dict) -> tuple:
    """What the ``window`` lines around each line say: (baseline, threshold, whether the line
    is a sudden rise (spike) or stays down for ``stays`` lines (cliff))."""
    median = trailing_median(values, rules["window"], rules["min_lines"])
    scale = noise_scale(values, median, rules)
    sign = 1.0 if kind == "spike" else -1.0
    rel = rules["ratio"] - 1.0 if kind == "spike" else rules["drop"]
    threshold = np.maximum(rules["sigmas"] * scale, rel * np.abs(median))
    excess = sign * (values - median)
    with np.errstate(invalid="ignore"):
        if kind == "spike":  # sudden: most of the excess arrived in one line
            return median, threshold, np.diff(values, prepend=np.nan) > rules["sudden"] * excess
        level = median - 0.5 * threshold
        ok = np.ones(len(values), dtype=bool)
        for k in range(1, rules["stays"] + 1):  # and it stays down
            ahead = np.full(len(values), np.nan)
            ahead[:max(len(values) - k, 0)] = values[k:]
            ok &= ahead < level
    return median, threshold, ok


def divergence_mask(values: np.ndarray, bad: np.ndarray, carried: tuple | None = None,
                    rules: dict | None = None) -> tuple:
    """The divergence rule for every line of one metric (``values``: NaN where not logged or
    not finite, ``bad``: where not finite): (whether it holds, the best value before each
    line, the level the episode lasts above, best_and_high's carry). The last ``stays`` lines
    read as not holding: what follows them is not known yet. ``carried``: best_and_high's
    carry for the lines before ``values``' first; ``rules``: SQL_PARAMS["divergences"]."""
    rules = rules or SQL_PARAMS["divergences"]
    best, high, state = best_and_high(values, carried)
    level = np.fmax(rules["ratio"] * best, rules["above"] * high)
    with np.errstate(invalid="ignore"):
        hit = (best > 0) & (values >= level)
        logged = np.zeros(len(values), dtype=bool)
        for k in range(1, int(rules["stays"]) + 1) if hit.any() else ():  # mostly none
            later = _ahead(values, k, np.nan)
            hit &= ~np.isfinite(later) | (later >= level)
            logged |= np.isfinite(later) | _ahead(bad, k, False)
    hit &= logged
    hit[max(0, len(values) - int(rules["stays"])):] = False
    return hit, best, level, state


def _ahead(values: np.ndarray, k: int, fill) -> np.ndarray:
    """``values`` k lines later (``fill`` past the end)."""
    out = np.full(len(values), fill, dtype=values.dtype)
    out[:max(len(values) - k, 0)] = values[k:]
    return out


def best_and_high(values: np.ndarray, carried: tuple | None) -> tuple:
    """Per line, the best (lowest) value before it and the highest value before that best
    (-inf while the best is the first value), NaN skipped; and a function giving what to carry
    to the lines after the first k: (best, highest before it, highest), as ``carried`` was for
    these lines."""
    lo0, hb0, hi0 = carried or (np.inf, -np.inf, -np.inf)
    low = np.fmin.accumulate(np.concatenate([[lo0], values]))  # low[j]: min before line j
    top = np.fmax.accumulate(np.concatenate([[hi0], values]))  # top[j]: max before line j
    at = np.arange(len(values) + 1)
    with np.errstate(invalid="ignore"):
        record = np.concatenate([[True], values < low[:-1]])  # a new best at line j - 1
    before = np.concatenate([[hb0], top[:-1]])  # the highest before that new best
    high = before[np.maximum.accumulate(np.where(record, at, 0))]
    return low[:-1], high[:-1], lambda k: (float(low[k]), float(high[k]), float(top[k]))
