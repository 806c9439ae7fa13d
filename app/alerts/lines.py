"""Rules judged line by line: ``threshold``, ``change`` and ``nonfinite``.

Each rule turns a run's new lines (the frame ``app.diagnose.load.run_lines`` reads) into a
series per metric: the lines that logged it, with the condition at each. A line that did not
log the metric says nothing (a metric logged every 100 steps is judged every 100 steps); NaN
is the ``nonfinite`` rule's business and neither holds nor breaks a threshold or change.
"""

from __future__ import annotations

import fnmatch
import operator
from collections import deque
from dataclasses import dataclass

import bottleneck as bn
import numpy as np
import pandas as pd

from ..diagnose.detect import NONFINITE, NOT_METRICS
from ..ingest.columns import fold
from . import lifecycle
from .rules import Rule, describe
from .state import ACTIVE, PassWrites, json_number

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


@dataclass
class Series:
    steps: np.ndarray
    values: np.ndarray
    cond: np.ndarray
    typical: np.ndarray | None = None  # the change rule's trailing median at each line


def metric_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in NOT_METRICS and not c.startswith(NONFINITE)]


def flags(frame: pd.DataFrame, column: str) -> np.ndarray:
    name = NONFINITE + column
    if name in frame.columns:
        return frame[name].to_numpy(dtype=bool)
    return np.zeros(len(frame), dtype=bool)


def watched(rule: Rule, frame: pd.DataFrame) -> list[str]:
    """The frame's columns a rule looks at (metric names compare as DuckDB's do)."""
    columns = metric_columns(frame)
    if rule.type in ("threshold", "change"):
        return [c for c in columns if fold(c) == fold(rule.metric or "")]
    if not rule.metrics:
        return columns
    return [c for c in columns
            if any(fnmatch.fnmatchcase(c, g) or fnmatch.fnmatchcase(fold(c), fold(g))
                   for g in rule.metrics)]


def threshold_series(rule: Rule, frame: pd.DataFrame, column: str) -> Series:
    values = frame[column].to_numpy(dtype=float)
    valid = ~np.isnan(values)
    kept = values[valid]
    return Series(frame["step"].to_numpy()[valid], kept, OPS[rule.op](kept, rule.value))


def nonfinite_series(frame: pd.DataFrame, column: str) -> Series:
    values, flagged = frame[column].to_numpy(dtype=float), flags(frame, column)
    logged = ~np.isnan(values) | flagged  # NULL (not logged) is neither
    return Series(frame["step"].to_numpy()[logged], values[logged], flagged[logged])


def change_series(rule: Rule, frame: pd.DataFrame, column: str, window: deque) -> Series:
    """Each finite value against the median of the ``rule.window`` finite values before it;
    ``window`` (carried between batches, rebuilt from the database after a restart) moves on."""
    values = frame[column].to_numpy(dtype=float)
    valid = np.isfinite(values)
    kept = values[valid]
    history = np.fromiter(window, dtype=float, count=len(window))
    full = np.concatenate([history, kept])
    medians = bn.move_median(full, rule.window, min_count=rule.window)
    before = np.concatenate([[np.nan], medians[:-1]])[len(history):]  # median of lines before
    window.extend(kept.tolist())
    judged = ~np.isnan(before)
    kept, before = kept[judged], before[judged]
    return Series(frame["step"].to_numpy()[valid][judged], kept,
                  changed(rule, kept, before), before)


def changed(rule: Rule, values: np.ndarray, median: np.ndarray) -> np.ndarray:
    if rule.direction == "rise":
        bound = median * rule.factor if rule.factor else median * (1 + (rule.fraction or 0))
        return values >= bound
    bound = median / rule.factor if rule.factor else median * (1 - (rule.fraction or 0))
    return values <= bound


def judge(batch: PassWrites, rule: Rule, key, series: Series, silences) -> None:
    """Walk the series' runs of equal condition through the lifecycle."""
    cond = series.cond.astype(bool)
    if not len(cond):
        return
    bounds = np.flatnonzero(np.diff(cond.astype(np.int8))) + 1
    for start, end in zip([0, *bounds], [*bounds, len(cond)], strict=True):
        if cond[start]:
            _holds(batch, rule, key, series, int(start), int(end), silences)
        else:
            st = batch.peek(key)
            if st is not None and st.state in ACTIVE:
                st = batch.get(key)
                lifecycle.clear(batch, rule, st, facts(rule, st.metric, series, start, True),
                                silences)


def _holds(batch: PassWrites, rule: Rule, key, series: Series, start: int, end: int,
           silences) -> None:
    st = batch.get(key)
    if st.state not in ACTIVE:
        lifecycle.begin(batch, st, step=int(series.steps[start]),
                        value=float(series.values[start]))
        st.detail["pending_facts"] = facts(rule, st.metric, series, start, False)
    if st.state != "pending":
        return
    needed = max(1, rule.for_lines) - st.pending_lines  # lines still to hold, this one first
    if needed <= end - start and batch.now - st.pending_time >= rule.for_s:
        at = start + max(needed, 1) - 1
        st.pending_lines += at - start + 1
        lifecycle.fire(batch, rule, st, facts(rule, st.metric, series, at, False), silences)
    else:
        st.pending_lines += end - start


def facts(rule: Rule, metric: str, series: Series, i: int, resolved: bool) -> dict:
    step, value = int(series.steps[i]), float(series.values[i])
    typical = None if series.typical is None else float(series.typical[i])
    if rule.type == "threshold":
        typical = rule.value
    if resolved and rule.type == "nonfinite":
        summary = f"{metric} is finite again ({value:.4g} at step {step})"
    elif resolved:
        summary = f"{metric} back to {value:.4g} at step {step} ({describe(rule)} no longer holds)"
    elif rule.type == "nonfinite":
        summary = f"{metric} is {json_number(value)} at step {step}"
    elif rule.type == "change":
        size = abs(value / typical - 1) * 100 if typical else float("inf")
        way = "above" if rule.direction == "rise" else "below"
        summary = (f"{metric} {'rose' if rule.direction == 'rise' else 'fell'} {size:.0f}% "
                   f"{way} its trailing median {typical:.4g} (now {value:.4g} at step {step})")
    else:
        summary = f"{describe(rule)} (now {value:.4g} at step {step})"
    return {"metric": metric, "step": step, "value": value, "typical": typical,
            "summary": summary}
