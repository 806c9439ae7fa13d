"""Rules judged line by line: ``threshold``, ``change`` and ``nonfinite``, each declared here
once (``RULE_TYPES``: its keys, how it reads, the columns it watches and its series).

Each rule turns a run's new lines (the frame ``app.diagnose.load.run_lines`` reads) into a
series per metric: the lines that logged it, with the condition at each. A line that did not
log the metric says nothing (a metric logged every 100 steps is judged every 100 steps); NaN
is the ``nonfinite`` rule's business and neither holds nor breaks a threshold or change.
"""

from __future__ import annotations

import fnmatch
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import bottleneck as bn
import numpy as np

from ..diagnose.rules import NONFINITE, NOT_METRICS
from ..ingest.columns import fold
from . import lifecycle
from .fields import (
    DIRECTIONS,
    OPS,
    Field,
    RuleType,
    above,
    finite_number,
    held,
    lines_count,
    list_of,
    metric_glob,
    metric_name,
    one_of,
)
from .state import ACTIVE, PassWrites, json_number

if TYPE_CHECKING:  # rules.py builds Rule from the types declared here
    import pandas as pd  # a frame is handed in: the server's start never waits for pandas

    from .rules import Rule

COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


@dataclass
class Series:
    steps: np.ndarray
    values: np.ndarray
    cond: np.ndarray
    # the change rule's trailing median at each line; the threshold's value, one for all
    typical: np.ndarray | float | None = None


def metric_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in NOT_METRICS and not c.startswith(NONFINITE)]


def flags(frame: pd.DataFrame, column: str) -> np.ndarray:
    name = NONFINITE + column
    if name in frame.columns:
        return frame[name].to_numpy(dtype=bool)
    return np.zeros(len(frame), dtype=bool)


def metric_of(rule: Rule, frame: pd.DataFrame) -> list[str]:
    """The frame's column of the rule's ``metric`` (names compare as DuckDB's do)."""
    return [c for c in metric_columns(frame) if fold(c) == fold(rule.metric or "")]


def metrics_of(rule: Rule, frame: pd.DataFrame) -> list[str]:
    """The frame's columns matching the rule's ``metrics`` globs; every metric without."""
    columns = metric_columns(frame)
    if not rule.metrics:
        return columns
    return [c for c in columns
            if any(fnmatch.fnmatchcase(c, g) or fnmatch.fnmatchcase(fold(c), fold(g))
                   for g in rule.metrics)]


def threshold_series(rule: Rule, frame: pd.DataFrame, column: str) -> Series:
    values = frame[column].to_numpy(dtype=float)
    valid = ~np.isnan(values)
    kept = values[valid]
    return Series(frame["step"].to_numpy()[valid], kept, COMPARE[rule.op](kept, rule.value),
                  rule.value)


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
    typical = series.typical
    if isinstance(typical, np.ndarray):
        typical = float(typical[i])
    summary = BY_NAME[rule.type].summary(rule, metric, step, value, typical, resolved)
    return {"metric": metric, "step": step, "value": value, "typical": typical,
            "summary": summary}


def said(rule: Rule) -> str:
    """rules.describe of a rule judged here: "loss > 5 for 20 lines"."""
    return BY_NAME[rule.type].describe(rule, held(rule))


def _back(rule: Rule, metric: str, step: int, value: float) -> str:
    return f"{metric} back to {value:.4g} at step {step} ({said(rule)} no longer holds)"


# -- threshold: metric op value ---------------------------------------------------------
def _threshold_text(rule: Rule, held: str) -> str:
    return f"{rule.metric} {rule.op} {rule.value:g}{held}"


def _threshold_series(rule: Rule, frame: pd.DataFrame, column: str, active: bool,
                      window: Callable[[], deque]) -> Series:
    return threshold_series(rule, frame, column)


def _threshold_summary(rule: Rule, metric: str, step: int, value: float, typical,
                       resolved: bool) -> str:
    if resolved:
        return _back(rule, metric, step, value)
    return f"{said(rule)} (now {value:.4g} at step {step})"


# -- change: the metric rises above / falls below its trailing median of `window` lines -----
def _change_text(rule: Rule, held: str) -> str:
    rise = rule.direction == "rise"
    if rule.fraction is not None:
        verb, side = ("rises", "above") if rise else ("falls", "below")
        how = f"{verb} {rule.fraction:.0%} {side}"
    else:
        how = f"rises to {rule.factor:g}×" if rise else f"falls to 1/{rule.factor:g} of"
    return f"{rule.metric} {how} its median of the last {rule.window} lines{held}"


def _change_checks(table: dict, values: dict) -> list[tuple[str | None, str]]:
    out = []
    given = [k for k in table if k in ("factor", "fraction")]  # in file order
    if len(given) != 1:
        out.append((given[-1] if given else "factor",
                    "give exactly one of factor (factor = 2: twice or half the median) "
                    "or fraction (fraction = 0.4: 40% above or below it)"))
    fraction = values.get("fraction")
    if values.get("direction") == "fall" and fraction is not None and fraction >= 1:
        out.append(("fraction", f"must be below 1 for direction = \"fall\" (a fall of "
                    f"{fraction:g} × the median goes to or below zero); e.g. 0.4 for 40%"))
    return out


def _change_summary(rule: Rule, metric: str, step: int, value: float, typical,
                    resolved: bool) -> str:
    if resolved:
        return _back(rule, metric, step, value)
    size = abs(value / typical - 1) * 100 if typical else float("inf")
    way = "above" if rule.direction == "rise" else "below"
    return (f"{metric} {'rose' if rule.direction == 'rise' else 'fell'} {size:.0f}% "
            f"{way} its trailing median {typical:.4g} (now {value:.4g} at step {step})")


def _change_series(rule: Rule, frame: pd.DataFrame, column: str, active: bool,
                   window: Callable[[], deque]) -> Series:
    return change_series(rule, frame, column, window())


# -- nonfinite: NaN or ±inf in the listed metrics -------------------------------------------
def _nonfinite_text(rule: Rule, held: str) -> str:
    where = ", ".join(rule.metrics) if rule.metrics else "any metric"
    return f"NaN or ±inf in {where}{held}"


def _nonfinite_summary(rule: Rule, metric: str, step: int, value: float, typical,
                       resolved: bool) -> str:
    if resolved:
        return f"{metric} is finite again ({value:.4g} at step {step})"
    return f"{metric} is {json_number(value)} at step {step}"


def _nonfinite_series(rule: Rule, frame: pd.DataFrame, column: str, active: bool,
                      window: Callable[[], deque]) -> Series | None:
    if not active and not flags(frame, column).any():
        return None  # nothing to start and nothing to resolve: no state row
    return nonfinite_series(frame, column)


METRIC = Field("metric", "metric", metric_name, 'the metric to watch, e.g. metric = "loss"',
               True)
RULE_TYPES = (
    RuleType(
        "threshold", "lines", (
            METRIC,
            Field("op", "op", one_of(OPS), 'one of >, >=, <, <=, e.g. op = ">"', True),
            Field("value", "value", finite_number, "the number to compare with, e.g. value = 5",
                  True),
        ), _threshold_text, watched=metric_of, series=_threshold_series,
        summary=_threshold_summary),
    RuleType(
        "change", "lines", (
            METRIC,
            Field("direction", "direction", one_of(DIRECTIONS),
                  'direction = "rise" or direction = "fall"', True),
            # rise: value >= factor * median; fall: value <= median / factor
            Field("factor", "factor", above(1, "a factor of 2 means twice or half the median"),
                  "factor = 2"),
            # rise: value >= median * (1 + fraction); fall: value <= median * (1 - fraction)
            Field("fraction", "fraction", above(0, "0.4 means 40% from the median"),
                  "fraction = 0.4"),
            Field("window", "window", lines_count, "window = 20 (lines in the trailing median)",
                  default=20),
        ), _change_text, _change_checks, metric_of, _change_series, _change_summary),
    RuleType(
        "nonfinite", "lines", (
            Field("metrics", "metrics", list_of(metric_glob, '["loss", "grad_*"]'),
                  'metrics = ["loss", "grad_*"] (default every metric)', default=()),
        ), _nonfinite_text, watched=metrics_of, series=_nonfinite_series,
        summary=_nonfinite_summary),
)
BY_NAME = {t.name: t for t in RULE_TYPES}
