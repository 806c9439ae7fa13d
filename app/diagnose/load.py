"""Reading one run's lines from DuckDB into the frame the detector judges.

Metric NULL (not logged) and NaN (logged as NaN) must stay apart: Arrow keeps them apart,
so each metric gets a companion flag column marking NaN/inf values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..db import queries
from .detect import CLOCK, NONFINITE, NOT_METRICS, Watch


def run_lines(cursor, run: str, watch: Watch, after: int = -1) -> pd.DataFrame:
    """Lines of ``run`` with ``line_id > after``: step, CLOCK, attempt, line_id, the metrics, and
    a NaN/inf flag column for each metric that has any."""
    table = queries.arrow(cursor, "run_lines", {"run": run, "after": after})
    return frame_of(table, watch)


def frame_of(table: pa.Table, watch: Watch) -> pd.DataFrame:
    columns: dict[str, np.ndarray] = {
        "line_id": table["line_id"].to_numpy(),
        "step": table["step"].to_numpy(),
        "attempt": table["attempt"].to_numpy(),
        CLOCK: _clock(table),
    }
    for name in table.column_names:
        if name in NOT_METRICS:
            continue
        column = table[name]
        if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            continue
        if column.null_count == len(column):
            continue  # a metric other runs log: nothing to judge here
        values = column.cast(pa.float64())
        columns[name] = values.to_numpy(zero_copy_only=False)
        flagged = pc.and_(pc.is_valid(values), pc.invert(pc.is_finite(values)))
        if pc.any(flagged).as_py():  # a missing flag column reads as "all finite"
            columns[NONFINITE + name] = flagged.to_numpy(zero_copy_only=False)
    return pd.DataFrame(columns)


def _clock(table: pa.Table) -> np.ndarray:
    """Seconds for time gaps, line by line: elapsed_s where logged, else the Unix time (the
    gap rule's line_clock, migration 0028, here on a frame the detector pairs line by line),
    so the answer does not depend on which lines came together."""
    clock = pa.nulls(len(table), pa.float64())
    for name in ("time", "elapsed_s"):
        if name in table.column_names:
            clock = pc.coalesce(table[name].cast(pa.float64()), clock)
    return clock.to_numpy(zero_copy_only=False)


def evaluated(cursor, run: str) -> Callable[[int, int], bool]:
    """Whether ``run`` logged an evaluation (an evals row of kind 'eval', or an eval_start /
    eval_end event) at a step from lo to below hi: what a stall's gap held (detect.py). Asked
    only of a gap that would be a stall, so a tick with none reads nothing more; the evaluation
    was logged before the line after the gap, so a live tick finds what the whole run does."""
    def between(lo: int, hi: int) -> bool:
        rows = queries.execute(cursor, "diagnose/evaluated_between",
                               {"run": run, "lo": lo, "hi": hi - 1}).fetchall()
        return bool(rows[0][0])
    return between
