"""The bucket strip under the loss chart: one cell per micro-batch, coloured by its bucket::

    x0      x1      step  micro  bucket  share
    1.0     1.5     1     0      0       1.0     # step 1 logged buckets [0, 2, 3, 5]: the
    1.5     2.0     1     1      2       1.0     # interval before it split in four
    ...

A line's ``buckets`` split the interval from the attempt's previous line to that line evenly.
When the range holds more than ``max_cells`` micro-batches, it is cut into ``max_cells`` equal
step ranges instead, each one cell: ``bucket`` the most common one, ``share`` its fraction.
Past ``SAMPLED_LINES`` lines per cell only one line in k is read (every k-th by line_id), so
the whole strip of a 10,000,000-line run costs one bounded pass. A range whose chart tiles
hold more than ``COUNTED_LINES`` lines is merged without counting its micro-batches (a run
logging ``buckets`` on only a few of so many lines shows the few the sampling meets).
"""

from __future__ import annotations

import math

import pandas as pd

from app.db import queries
from app.read import frame

COLUMNS = ["x0", "x1", "step", "micro", "bucket", "share"]
SAMPLED_LINES = 16  # lines read per merged cell, on average, at most
COUNTED_LINES = 200_000  # past this many tiled lines in range, cells are not counted
WINDOWS = (4096, 1 << 20, None)  # steps looked back for the line before a range; None: any


def bucket_strip(cursor, run: str, *, lo: int | None = None, hi: int | None = None,
                 x: str = "step", max_cells: int = 3000) -> pd.DataFrame:
    """Cells of steps ``lo..hi`` (inclusive; None: open) in the unit ``x``; empty when the
    run logs no ``buckets``."""
    span = {"run": run, "lo": lo, "hi": hi}
    (tiled,), = queries.execute(cursor, "read/strip_tile_lines", span).fetchall()
    if tiled > COUNTED_LINES:  # surely merged: counting every line would cost a full pass
        lines, cells = tiled, tiled
    else:
        (lines, cells), = queries.execute(cursor, "read/strip_size", span).fetchall()
    if not cells:
        return pd.DataFrame(columns=COLUMNS)
    if cells <= max_cells:
        return frame(cursor, "read/strip_cells", {**span, "x": x,
                                                  "before": line_before(cursor, run, lo)})
    every = max(1, math.ceil(lines / (max_cells * SAMPLED_LINES)))
    return frame(cursor, "read/strip_groups",
                 {**span, "x": x, "groups": max_cells, "every": every})


def line_before(cursor, run: str, lo: int | None) -> int | None:
    """Step of the run's last line before step ``lo`` (None: none, or no ``lo``), looked up
    in growing step windows so that a zoom far into a long run reads a row group or two."""
    if lo is None:
        return None
    for window in WINDOWS:
        (step,), = queries.execute(cursor, "read/strip_before",
                                   {"run": run, "lo": lo, "window": window}).fetchall()
        if step is not None:
            return step
    return None
