"""The bucket strip under the loss chart: one cell per micro-batch, coloured by its bucket::

    x0      x1      step  micro  bucket  share
    1.0     1.5     1     0      0       1.0     # step 1 logged buckets [0, 2, 3, 5]: the
    1.5     2.0     1     1      2       1.0     # interval before it split in four
    ...

A line's ``buckets`` split the interval from the attempt's previous line to that line evenly.
When the range holds more than ``max_cells`` micro-batches, it is cut into ``max_cells`` equal
step ranges instead, each one cell: ``bucket`` the most common one, ``share`` its fraction.
Past ``SAMPLED_LINES`` lines per cell only one line in k is read (every k-th by line_id).

A range whose chart tiles hold more than ``COUNTED_LINES`` lines (a long run's whole strip)
is merged from blocks of consecutive lines instead, without a pass over its lines: its
chart tiles (app/read/tiles.py) and the untiled tail in blocks of as many lines. Cells are
runs of whole blocks (at most ``BLOCK_CELLS``, as many as a chart's points: the strip is
never more detailed than the charts above it), placed where their first block starts.
``SAMPLE_LINES`` lines in all are read by rowid, a run of consecutive lines in each cell,
and each cell's bucket and share are those of its sampled lines' micro-batches. Three
round trips, ~40 ms at 10,000,000 lines (bench/dashboard.py), where a pass picking every
k-th line took ~120.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from ..db import queries
from . import frame
from .tiles import TILE_LINES

COLUMNS = ["x0", "x1", "step", "micro", "bucket", "share"]
SAMPLED_LINES = 16  # lines read per merged cell, on average, at most
COUNTED_LINES = 200_000  # past this many lines in range, the strip is merged from blocks
BLOCK_CELLS = 1000  # cells of a strip merged from blocks, at most
SAMPLE_LINES = 4096  # lines read for a strip merged from blocks
WINDOWS = (4096, 1 << 20, None)  # steps looked back for the line before a range; None: any


def bucket_strip(cursor, run: str, *, lo: int | None = None, hi: int | None = None,
                 x: str = "step", max_cells: int = 3000,
                 counted_lines: int = COUNTED_LINES) -> pd.DataFrame:
    """Cells of steps ``lo..hi`` (inclusive; None: open) in the unit ``x``; empty when the
    run logs no ``buckets``. A range whose tiles hold more than ``counted_lines`` lines is
    merged from blocks (see the module docstring)."""
    span = {"run": run, "lo": lo, "hi": hi}
    (tiled,), = queries.execute(cursor, "read/strip_tile_lines", span).fetchall()
    if tiled > counted_lines:  # surely merged: counting every line would cost a full pass
        blocks = frame(cursor, "read/strip_blocks", {**span, "x": x, "tile": TILE_LINES})
        return from_blocks(cursor, blocks, (lo, hi, x), min(max_cells, BLOCK_CELLS))
    (lines, cells), = queries.execute(cursor, "read/strip_size", span).fetchall()
    if not cells:
        return pd.DataFrame(columns=COLUMNS)
    if cells <= max_cells:
        return frame(cursor, "read/strip_cells", {**span, "x": x,
                                                  "before": line_before(cursor, run, lo)})
    every = max(1, math.ceil(lines / (max_cells * SAMPLED_LINES)))
    return frame(cursor, "read/strip_groups",
                 {**span, "x": x, "groups": max_cells, "every": every})


def from_blocks(cursor, blocks: pd.DataFrame, where: tuple, max_cells: int) -> pd.DataFrame:
    """At most ``max_cells`` cells of whole blocks, each the mode of its sampled lines'
    micro-batches (a cell none of whose sampled lines logs buckets is left out)."""
    blocks = blocks[blocks["x0"].notna()].reset_index(drop=True)
    if blocks.empty:
        return pd.DataFrame(columns=COLUMNS)
    cell = np.arange(len(blocks)) * min(max_cells, len(blocks)) // len(blocks)
    lines, owner = sample_lines(blocks, cell)
    found = queries.arrow_small(cursor, "read/strip_sample", {"lines": lines.tolist()})
    kept = valid(found, blocks, owner, lines, where)
    counts = _modes(found, kept, cell)
    if counts.empty:
        return pd.DataFrame(columns=COLUMNS)
    first = np.searchsorted(cell, counts.index.to_numpy())  # each kept cell's first block
    last_block = np.searchsorted(cell, counts.index.to_numpy()[-1], side="right") - 1
    x0 = blocks["x0"].to_numpy(dtype="float64")[first]
    step = blocks["first_step"].to_numpy(dtype="int64")[first]
    lo, hi, x = where
    end = float(blocks["x1"].iat[last_block])
    if x == "step" and lo is not None:  # the range's own ends, where a block reaches past
        x0[0], step[0] = max(x0[0], lo), max(step[0], lo)
    if x == "step" and hi is not None:
        end = min(end, hi)
    return pd.DataFrame({"x0": x0, "x1": np.append(x0[1:], end), "step": step,
                         "micro": np.zeros(len(first), dtype="int32"),
                         "bucket": counts["bucket"].to_numpy(dtype="int32"),
                         "share": counts["share"].to_numpy(dtype="float64")})


def sample_lines(blocks: pd.DataFrame, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rowids of the lines read for each cell, ``SAMPLE_LINES`` in all, and the block each is
    meant to be in: a run of consecutive lines, the last of an even cell's last block and the
    first of the next cell's first block, so that two cells' runs touch (reading costs by the
    row vectors touched, ~15 ms more a thousand). A block's lines are taken as consecutive
    rowids from its ends; one that lands on another file's line is dropped (``valid``)."""
    cells = int(cell[-1]) + 1
    per = max(1, SAMPLE_LINES // cells)
    first = np.searchsorted(cell, np.arange(cells))
    last = np.append(first[1:], len(cell)) - 1
    even = np.arange(cells) % 2 == 0
    owner = np.where(even, last, first)
    sizes = blocks["lines"].to_numpy(dtype="int64")[owner]
    offsets = np.arange(per)[None, :]
    keep = offsets < sizes[:, None]
    ends = np.where(even, blocks["last_line"].to_numpy(dtype="int64")[owner],
                    blocks["first_line"].to_numpy(dtype="int64")[owner])
    lines = (ends[:, None] + np.where(even[:, None], -offsets, offsets))[keep]
    owner = np.broadcast_to(owner[:, None], keep.shape)[keep]
    # sorted and unique, so ``valid`` finds each row's block by bisection (two files' blocks
    # may interleave in rowid; a tile's two attempts may even share sampled rowids)
    lines, first = np.unique(lines, return_index=True)
    return lines, owner[first]


def valid(found, blocks: pd.DataFrame, owner: np.ndarray, lines: np.ndarray,
          where: tuple) -> np.ndarray:
    """For each sampled row found: the block it was meant for (-1 where it is another file's
    or attempt's line, past the block, outside lo..hi or off the current timeline)."""
    lo, hi, _ = where
    line = found.column("line").to_numpy()
    index = np.searchsorted(lines, line)  # lines are sorted and unique
    block = owner[index]
    step = found.column("step").to_numpy()
    cutoff = blocks["cutoff_step"].to_numpy(dtype="float64", na_value=np.inf)[block]
    ok = ((found.column("file_id").to_numpy() == blocks["file_id"].to_numpy()[block])
          & (found.column("attempt").to_numpy() == blocks["attempt"].to_numpy()[block])
          & (line <= blocks["last_line"].to_numpy()[block]) & (step < cutoff)
          & (step >= (lo if lo is not None else step)) & (step <= (hi if hi is not None
                                                                    else step)))
    return np.where(ok, block, -1)


def _modes(found, kept: np.ndarray, cell: np.ndarray) -> pd.DataFrame:
    """Per cell with sampled micro-batches (the index, sorted): its most common bucket (the
    smallest of those tied) and that bucket's share. A few thousand values: numpy counts."""
    buckets = found.column("buckets").combine_chunks()
    parents = pc.list_parent_indices(buckets).to_numpy()
    values = pc.list_flatten(buckets).to_numpy(zero_copy_only=False)
    block = kept[parents]
    ok = (block >= 0) & ~np.isnan(values.astype("float64"))
    if not ok.any():
        return pd.DataFrame(columns=["bucket", "share"])
    names, code = np.unique(values[ok].astype("int64"), return_inverse=True)
    cells = cell[block[ok]]
    counts = np.zeros((int(cell[-1]) + 1, len(names)), dtype="int64")
    np.add.at(counts, (cells, code), 1)
    seen = np.flatnonzero(counts.sum(axis=1))
    counts = counts[seen]
    top = counts.argmax(axis=1)  # the first of those tied: the smallest bucket
    share = counts[np.arange(len(seen)), top] / counts.sum(axis=1)
    return pd.DataFrame({"bucket": names[top], "share": share}, index=seen)


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
