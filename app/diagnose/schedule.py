"""Where a run's learning-rate schedule stood at each line, from the lr the log carries (``lr``,
``learning_rate``, ``lr-Adam``, ...: detect.SCHEDULE), for the ``learning_rate`` cause: a
spike or divergence while the lr rises in warm-up, sits at its peak right after warm-up ended,
or just after it rose. For example megatron-lm-llama1b's gradient-norm spike at iteration 30::

    lr 1.8e-04 at step 30, rising in warm-up (from 6.0e-06 at step 1, 30x; the highest so far).

Only the lines up to an incident are read (the peak a warm-up is heading for is not known yet
while it rises), so the live path, fed line by line, and the whole run say the same. A run fed
in batches keeps what it needs in ``Schedule`` (the last lr, its highest and first values),
as causes.BucketRuns does for buckets.
"""

from __future__ import annotations

import fnmatch

import numpy as np
import pyarrow as pa

from .detect import SCHEDULE, is_schedule

COLUMNS = ("lr", "lr_peak", "lr_peak_step", "lr_first", "lr_first_step")  # per line
WARMED = 0.5  # a warm-up: the lr started at most this fraction of its peak (a constant lr has none)
AT_PEAK = 0.9  # "at its peak": at least this fraction of it ...
AFTER_PEAK = 1.0  # ... for at most this many warm-ups' length of steps after it was reached
ROSE = 1.1  # "just after it rose": up this many times within the incident's window


def pick(table: pa.Table) -> str | None:
    """The lr column of a run's lines: the lr-like one with the most values (the first in
    SCHEDULE's order on a tie), or None when the run logs none."""
    best, most = None, 0
    for name in sorted((n for n in table.column_names if is_schedule(n)), key=_rank):
        column = table[name]
        if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            continue
        count = len(column) - column.null_count
        if count > most:
            best, most = name, count
    return best


def _rank(name: str) -> tuple[int, str]:
    return next(i for i, p in enumerate(SCHEDULE) if fnmatch.fnmatchcase(name.lower(), p)), name


class Schedule:
    """Fed a run's lines in order (all at once or as they arrive, with the same answers): per
    line, the last lr logged (a sparse log, as Lightning's lr-monitor rows, carries it over),
    its highest value so far and the step that first reached it, and its first value and
    step."""

    def __init__(self):
        self.name: str | None = None  # the lr column, chosen from the first lines that log one
        self.last = self.peak = self.first = np.nan
        self.peak_step = self.first_step = -1

    def feed(self, table: pa.Table) -> dict[str, np.ndarray]:
        n = table.num_rows
        self.name = self.name or pick(table)
        if self.name is None or self.name not in table.column_names:
            return self._carried(n)
        values = table[self.name].cast(pa.float64()).to_numpy(zero_copy_only=False)
        values = np.where(np.isfinite(values), values, np.nan)
        steps = table["step"].to_numpy(zero_copy_only=False).astype(np.int64)
        logged = np.flatnonzero(~np.isnan(values))
        if not len(logged):
            return self._carried(n)
        if np.isnan(self.first):
            self.first, self.first_step = float(values[logged[0]]), int(steps[logged[0]])
        last = np.concatenate([[self.last], values])
        index = np.maximum.accumulate(np.where(np.isnan(last), 0, np.arange(n + 1)))
        lr = last[index][1:]  # carried forward, from the lines before too
        peak = np.fmax.accumulate(np.concatenate([[self.peak], values]))
        record = np.concatenate([[False], peak[1:] > np.nan_to_num(peak[:-1], nan=-np.inf)])
        at = np.maximum.accumulate(np.where(record, np.arange(n + 1), 0))
        peak_step = np.where(at > 0, steps[np.maximum(at - 1, 0)], self.peak_step)[1:]
        self.last, self.peak, self.peak_step = float(lr[-1]), float(peak[-1]), int(peak_step[-1])
        return {"lr": lr, "lr_peak": peak[1:], "lr_peak_step": peak_step,
                "lr_first": np.full(n, self.first), "lr_first_step": np.full(n, self.first_step)}

    def _carried(self, n: int) -> dict[str, np.ndarray]:
        return {"lr": np.full(n, self.last), "lr_peak": np.full(n, self.peak),
                "lr_peak_step": np.full(n, self.peak_step), "lr_first": np.full(n, self.first),
                "lr_first_step": np.full(n, self.first_step)}


def explain(window, step: int, name: str | None) -> str | None:
    """Where the schedule stood at an incident whose first line is ``window``'s last (its
    COLUMNS as Schedule.feed gave them), or None when that explains nothing: no lr logged, no
    warm-up (a constant lr), or the lr well past its peak and not rising."""
    end, start = window.iloc[-1], window.iloc[0]
    lr, peak, first = float(end["lr"]), float(end["lr_peak"]), float(end["lr_first"])
    if not (np.isfinite(lr) and np.isfinite(peak) and peak > 0 and np.isfinite(first)):
        return None
    warmed = first <= WARMED * peak
    began = f"from {first:.1e} at step {int(end['lr_first_step'])}"
    before = float(start["lr"])
    rising = np.isfinite(before) and lr > before and lr >= peak
    if rising and warmed:
        times = f", {lr / first:.0f}x" if first > 0 else ""
        return (f"lr {lr:.1e} at step {step}, rising in warm-up ({began}{times}; the highest "
                f"so far).")
    peak_step = int(end["lr_peak_step"])
    warm_up = peak_step - int(end["lr_first_step"])
    if warmed and lr >= AT_PEAK * peak and step - peak_step <= AFTER_PEAK * warm_up:
        return (f"lr {lr:.1e} at step {step}, at its peak {peak:.1e}: warm-up ({began}) ended "
                f"at step {peak_step}, {step - peak_step} steps before.")
    if np.isfinite(before) and before > 0 and lr >= ROSE * before:
        return (f"lr rose {lr / before:.1f}x, from {before:.1e} at step "
                f"{int(window['step'].iat[0])} to {lr:.1e} at step {step}.")
    return None
