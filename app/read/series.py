"""A run's metrics as chart series: at most ``points`` buckets per metric whatever the run's
length, each keeping its min and max (with their steps), so no spike is lost.

    >>> s = series(cursor, "seed-cliff", ["loss"], points=1000)
    >>> s.lines, s.full          # 2,230 lines in 1,000 buckets
    (2230, False)
    >>> s.frame.iloc[0]
    metric loss  attempt 1  x 1.0  step 1  value 0.80  lo 0.79  hi 0.81  lo_step 1  hi_step 5
    n 3  nonfinite 0

Every attempt is shown (``metrics_all``, not only the current timeline of ``metrics``): a
resumed run draws one line per attempt, and where attempts overlap in step, both are there.
Buckets are laid out per attempt on x (equal widths over the attempt's x span), an attempt
getting a share of ``points`` by its share of the lines. Lines without a value of the x
(``x="time"`` on a line with no ``time``, or with ``"time": Infinity`` or NaN: no place on an
axis) are left out.

Where the numbers come from (the caller sees no difference but speed):
- a range holding at most ``points`` lines: one row per line (``full=True``);
- at most ``RAW_LINES`` lines: bucketed from the raw lines;
- more: from chart tiles (app/read/tiles.py) for tiles wholly in the range, raw lines for the
  tiles only partly in it and for each file's lines after its tile watermark. A tile counts
  in the bucket where it starts. Until the tile worker has caught up (a freshly ingested
  10M-line log), the unrolled lines are read raw: correct, only slower.
Ranges ``lo``/``hi`` are steps, inclusive; None is open.

Round trips (each costs a few ms of DuckDB planning, more than most of these reads take): a
read is one plan query (the tiles overlapping the range, the files' watermarks and the span of
their untiled tails, which the watermark reaches as a dynamic rowid filter), then the tiles'
buckets and one raw read per piece that has lines in range (a rolled run's tail usually has
none). The bucket layout and the merging of partial buckets are plain Python over a handful
of rows. bench/dashboard.py prints the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..db import queries
from ..errors import CliffwatchError
from . import frame, tiles
from .tiles import GAPS, columns

RAW_LINES = 200_000  # ~40 ms to bucket from raw lines for 5 metrics (2 cores); more: tiles
MAX_POINTS = 2000
XS = {"step": "step", "elapsed": "elapsed_s", "time": "time"}
GAP_NAMES = {"~gap_s": "gap_s", "~gap_steps": "gap_steps"}
COLUMNS = ["metric", "attempt", "x", "step", "value", "lo", "hi", "lo_step", "hi_step", "n",
           "nonfinite"]


@dataclass
class Series:
    frame: pd.DataFrame  # COLUMNS, sorted by metric, attempt, x
    lines: int  # lines of the run inside [lo, hi] (with a value of x)
    full: bool  # True: one row per logged line (no bucketing happened)


def metric_names(cursor, run: str) -> list[str]:
    """The numeric metric columns this run has values in (not step, attempt, elapsed_s, time,
    epoch or buckets), in column order."""
    return names_and_axes(cursor, run)[0]


def axes(cursor, run: str) -> list[str]:
    """Which of "step", "elapsed", "time" the run's lines have."""
    return names_and_axes(cursor, run)[1]


def names_and_axes(cursor, run: str) -> tuple[list[str], list[str]]:
    """metric_names() and axes() from one read (the Run page needs both on each new line)."""
    schema = _schema(cursor)
    present = _present(cursor, run, schema)
    return ([c for c in tiles.metric_columns(schema) if c in present],
            ["step"] + [x for x in ("elapsed", "time") if XS[x] in present])


def version(cursor, run: str) -> tuple:
    """A cheap cache key: changes whenever the run gets lines (or more of it is tiled)."""
    return tuple(queries.execute(cursor, "read/series_version", {"run": run}).fetchall()[0])


def step_span(cursor, run: str) -> tuple[int, int] | None:
    """The run's first and last step (every attempt), None for a run with no lines."""
    low, high = queries.execute(cursor, "read/series_steps", {"run": run}).fetchall()[0]
    return None if low is None else (int(low), int(high))


def typical_gap(cursor, run: str) -> float | None:
    """The run's typical seconds between lines (the gap chart's reference line): the median
    gap of a run up to RAW_LINES lines; beyond, the median of its tiles' mean gaps."""
    rolled = sum(t["rolled"] for t in _tails(cursor, run))
    name = "read/tiles_gap_median" if rolled > RAW_LINES else "read/series_gap_median"
    value = queries.execute(cursor, name, {"run": run}).fetchall()[0][0]
    return None if value is None or not np.isfinite(value) else float(value)


def series(cursor, run: str, metrics: list[str], *, lo=None, hi=None, x: str = "step",
           points: int = 1000, raw_lines: int = RAW_LINES, gaps: bool = False) -> Series:
    """``metrics`` of ``run`` in steps [lo, hi] as at most ``points`` rows per metric (see the
    module docstring). A metric the run lacks is simply absent from the frame. A range of up
    to ``raw_lines`` lines is bucketed from raw lines, a longer one from tiles. ``gaps``: the
    frame has gaps()'s metrics "gap_s" and "gap_steps" too, read in the same round trips
    (the same rows as gaps() gives: the bucket layout depends on the lines, not the metrics);
    where ``metrics`` holds the run's own gap_s or gap_steps, the derived one is "~gap_s" or
    "~gap_steps", so the two are never merged."""
    known = set(columns(cursor))
    names = [m for m in dict.fromkeys(metrics) if m in known]
    return _read(cursor, run, names + (list(GAPS) if gaps else []), (lo, hi, x), points,
                 raw_lines)


def gaps(cursor, run: str, *, lo=None, hi=None, x: str = "step", points: int = 1000,
         raw_lines: int = RAW_LINES) -> Series:
    """Metrics "gap_s" (seconds since the attempt's previous line; elapsed_s, else time) and
    "gap_steps" (steps since it), shaped as series(); a bucket's hi is its longest gap."""
    return _read(cursor, run, list(GAPS), (lo, hi, x), points, raw_lines)


def _read(cursor, run, names, where, points, raw_lines) -> Series:
    lo, hi, x = where
    if x not in XS:
        raise CliffwatchError(f"x must be step, elapsed or time, not {x!r}")
    points = max(1, min(int(points), MAX_POINTS))
    if not names:
        return Series(pd.DataFrame(columns=COLUMNS), 0, False)
    params = {"run": run, "lo": lo, "hi": hi, "x": x}
    plan = frame(cursor, "read/series_plan", params)
    is_tail = plan["tail"].astype(bool)
    tiled, tails = plan[~is_tail], _tail_pieces(plan[is_tail])
    if int(plan["lines"].sum()) <= raw_lines:
        pieces = _live([*_spanned(cursor, _plan_pieces(tiled), where), *tails])
        spans = _concat([s for _, s in pieces])
        lines = int(spans["lines"].sum())
        full = lines <= points
        layout = _layout([] if full else [spans], points)
        parts = [_raw(cursor, p, names, layout, where) for p, _ in pieces]
    else:
        pieces = _live([*_spanned(cursor, _edge_pieces(tiled), where), *tails])
        spans = _concat([s for _, s in pieces])
        inside = tiled[["attempt", "inside_lines", "x0", "x1"]].rename(
            columns={"inside_lines": "lines"})
        lines, full = int(spans["lines"].sum() + inside["lines"].sum()), False
        layout = _layout([spans, inside], points)
        parts = [frame(cursor, "read/series_tiles", {**params, "metrics": names, **layout})]
        parts += [_raw(cursor, p, names, layout, where) for p, _ in pieces]
    return Series(_finish(_merge(parts), full, names), lines, full)


def _tail_pieces(tails: pd.DataFrame) -> list[tuple[dict, pd.DataFrame]]:
    """The plan's tail rows (each file's lines after its watermark, per attempt, with lines
    in range) as raw pieces with their spans."""
    spans = tails[["attempt", "lines", "x0", "x1", "step0", "step1"]]
    return [({"file_id": r.file_id, "after": r.after, "upto": None, "attempt": r.attempt,
              "prev_attempt": r.prev_attempt, "prev_step": r.prev_step, "prev_t": r.prev_t},
             spans.iloc[[i]]) for i, r in enumerate(tails.itertuples())]


def _tails(cursor, run) -> list[dict]:
    """Each metrics file's lines after its tile watermark, as a raw piece."""
    rows = frame(cursor, "read/series_files", {"run": run}).to_dict("records")
    return [{**r, "upto": None, "attempt": None} for r in rows]


def _plan_pieces(plan: pd.DataFrame) -> list[dict]:
    """Raw pieces covering every tile that overlaps the range, one per file and attempt."""
    return [{"file_id": r.file_id, "after": r.after, "upto": r.upto, "attempt": r.attempt,
             "prev_attempt": r.attempt, "prev_step": r.prev_step, "prev_t": r.prev_t}
            for r in plan.itertuples()]


def _edge_pieces(plan: pd.DataFrame) -> list[dict]:
    """Raw pieces for the tiles only partly inside the range (at most one at each end)."""
    return [{"file_id": r.file_id, "after": e["after"], "upto": e["upto"], "attempt": r.attempt,
             "prev_attempt": r.attempt, "prev_step": e["prev_step"], "prev_t": e["prev_t"]}
            for r in plan.itertuples() for e in (r.edges if r.edges is not None else ())]


def _piece_params(piece: dict) -> dict:
    return {"file": _plain(piece["file_id"]), "after": _plain(piece["after"]),
            "upto": _plain(piece["upto"]), "attempt": _plain(piece["attempt"])}


def _spanned(cursor, pieces: list[dict], where) -> list[tuple[dict, pd.DataFrame]]:
    """Each raw piece with its span per attempt: lines in range, first and last x and step."""
    lo, hi, x = where
    return [(p, frame(cursor, "read/series_span", {**_piece_params(p), "lo": lo, "hi": hi,
                                                   "x": x})) for p in pieces]


def _live(spanned: list[tuple[dict, pd.DataFrame]]) -> list[tuple[dict, pd.DataFrame]]:
    """The pieces with a line in range (a rolled run's tail usually has none): only those
    are read."""
    return [(p, s) for p, s in spanned if len(s) and s["lines"].sum() > 0]


def _concat(spans: list[pd.DataFrame]) -> pd.DataFrame:
    empty = pd.DataFrame(columns=["attempt", "lines", "x0", "x1", "step0", "step1"])
    return pd.concat([empty, *spans], ignore_index=True) if spans else empty


def _layout(spans: list[pd.DataFrame], points: int) -> dict:
    """Bucket edges per attempt: equal widths on x over the attempt's span, the attempt's
    share of ``points`` by its share of lines (so all attempts together stay <= points+1 each).
    No spans: no buckets (one row per line). A handful of rows: plain Python, not groupby."""
    per: dict[int, list] = {}  # attempt -> [lines, x0, x1]
    for frame_ in spans:
        for attempt, lines, x0, x1 in zip(frame_["attempt"], frame_["lines"], frame_["x0"],
                                          frame_["x1"], strict=True):
            if lines > 0:
                acc = per.setdefault(int(attempt), [0, math.nan, math.nan])
                acc[0] += int(lines)
                acc[1] = _nanmin(acc[1], x0)
                acc[2] = -_nanmin(-acc[2], -x1)
    total = sum(acc[0] for acc in per.values())
    layout: dict[str, list] = {"attempts": [], "x0s": [], "widths": [], "buckets": []}
    for attempt in sorted(per):
        lines, x0, x1 = per[attempt]
        nb = max(1, points * lines // total)
        width = (x1 - x0) / nb
        layout["attempts"].append(attempt)
        layout["x0s"].append(float(x0))
        layout["widths"].append(float(width) if width > 0 else 1.0)
        layout["buckets"].append(int(nb))
    return layout


def _nanmin(a, b) -> float:
    """min of two floats, a NaN or None counting as missing (as pandas' min does)."""
    a = math.nan if a is None else float(a)
    b = math.nan if b is None else float(b)
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def _raw(cursor, piece, names, layout, where) -> pd.DataFrame:
    lo, hi, x = where
    params = {**_piece_params(piece), "prev_attempt": _plain(piece["prev_attempt"]),
              "prev_step": _plain(piece["prev_step"]), "prev_t": _plain(piece["prev_t"]),
              "metrics": names, "lo": lo, "hi": hi, "x": x, **layout}
    return frame(cursor, "read/series_raw", params)


def _merge(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per (metric, attempt, bucket) from partial buckets (tiles, edges, tails)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=[*COLUMNS, "sum", "raw", "bucket"])
    rows = pd.concat(parts, ignore_index=True)
    keys = ["metric", "attempt", "bucket"]
    split = rows.duplicated(keys, keep=False)  # few: where a tile meets an edge or the tail
    if not split.any():
        return rows
    return pd.concat([rows[~split], _combine(rows[split], keys)], ignore_index=True)


def _combine(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The partial rows of each bucket as one (a few rows: plain Python, not groupby)."""
    out: dict[tuple, dict] = {}
    for row in rows.to_dict("records"):
        key = tuple(row[k] for k in keys)
        into = out.get(key)
        if into is None:
            out[key] = dict(row)
            continue
        into["raw"] = into["raw"] if _known(into["raw"]) else row["raw"]
        for name, pick in (("x", min), ("step", min)):
            into[name] = pick(into[name], row[name])
        into["n"] += row["n"]
        into["nonfinite"] += row["nonfinite"]
        into["sum"] = _add(into["sum"], row["sum"])
        if _known(row["lo"]) and (not _known(into["lo"]) or row["lo"] < into["lo"]):
            into["lo"], into["lo_step"] = row["lo"], row["lo_step"]
        if _known(row["hi"]) and (not _known(into["hi"]) or row["hi"] > into["hi"]):
            into["hi"], into["hi_step"] = row["hi"], row["hi_step"]
    return pd.DataFrame(list(out.values()), columns=rows.columns)


def _known(value) -> bool:
    return value is not None and value is not pd.NA and not (
        isinstance(value, float) and math.isnan(value))


def _add(a, b):
    """Sum of two partial sums, a missing one (no finite value) adding nothing."""
    if not _known(a):
        return b
    return a + b if _known(b) else a


def _finish(rows: pd.DataFrame, full: bool, names: list[str]) -> pd.DataFrame:
    rows = rows.copy()
    finite = rows["n"] - rows["nonfinite"]
    rows["value"] = rows["raw"] if full else rows["sum"] / finite.where(finite > 0)
    # a derived gap keeps its "~" name beside a metric of the run's own named gap_s: the
    # two stay two series (the Run page names the derived panel apart, panels.gap_panels)
    rows["metric"] = rows["metric"].replace(
        {ours: shown for ours, shown in GAP_NAMES.items() if shown not in names})
    out = rows[COLUMNS].astype({"attempt": "int64", "x": "float64", "step": "int64",
                                "value": "float64", "lo": "float64", "hi": "float64",
                                "lo_step": "Int64", "hi_step": "Int64", "n": "int64",
                                "nonfinite": "int64"})
    return out.sort_values(["metric", "attempt", "x"], ignore_index=True)


def _schema(cursor):
    """metric_rows' columns and types (one cheap query, read once a call)."""
    return queries.arrow_small(cursor, "read/tiles_columns").schema


def _present(cursor, run, schema) -> set[str]:
    """Names with a value in the run: from its tiles, and its raw tails."""
    axes = [c for c in ("elapsed_s", "time") if c in schema.names]
    columns = [*tiles.metric_columns(schema), *axes]
    return set(frame(cursor, "read/series_names", {"run": run, "columns": columns})["name"])


def _plain(value):
    """numpy and pandas scalars as Python values DuckDB binds (NA as NULL)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value
