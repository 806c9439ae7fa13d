"""The Runs table's lines a minute, over a window that ends now (issue 20, item 4): a run that
stopped writing 88 s ago at a line a second shows 42.4, not the 60.0 of its last 300 s of log,
and 0.0 once it has been quiet for the whole window::

    falling(cursor, table)  ->  [42.4, 6.0, 0.0, nan]   (nan: a log with no time field)

The pace before the silence comes from read/runs_tail, cached while a run's files stay as they
were (runs.Tails); only a run quiet for longer than ``grace`` and less than ``WINDOW_S`` reads
its tail again, with the window shortened by the silence.
"""

from __future__ import annotations

import math

import pandas as pd

from . import frame

WINDOW_S = 300.0  # read/runs_tail's window: the pace is measured over the last 5 minutes
# the monitor notices growth at its own polls and the page refreshes every 2 s, so a silence
# this short (or under two of the run's own intervals) says nothing yet
GRACE_S = 5.0


def grace(per_min: float) -> float:
    """Seconds of silence that do not lower a pace of ``per_min`` lines a minute yet."""
    return max(GRACE_S, 2 * 60.0 / per_min) if per_min > 0 else GRACE_S


def falling(cursor, table: pd.DataFrame) -> list[float]:
    """Each run's lines a minute over the ``WINDOW_S`` ending now. ``table``: the Runs table's
    rows with ``lines_per_min`` (over the window ending at the newest line), ``since_last_s``
    and ``tail`` (the (file, lo, hi) rowid range the pace was read from)."""
    return [now_pace(cursor, r.lines_per_min, r.since_last_s, r.tail)
            for r in table.itertuples()]


def now_pace(cursor, per_min, quiet_s, tail) -> float:
    if per_min is None or pd.isna(per_min) or quiet_s is None or pd.isna(quiet_s):
        return math.nan if per_min is None else per_min  # no time field, or never grew
    if quiet_s <= grace(per_min):
        return per_min
    if quiet_s >= WINDOW_S or not isinstance(tail, tuple):
        return 0.0
    file, lo, hi = tail
    found = frame(cursor, "read/runs_tail", {"file": file, "lo": lo, "hi": hi,
                                             "window_s": WINDOW_S - quiet_s}).iloc[0]
    # the lines of the window's part before the silence, over the window since its first one
    return 60.0 * max(int(found["n"]) - 1, 0) / ((found["span_s"] or 0.0) + quiet_s)
