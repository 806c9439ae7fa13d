"""The Run page's panels as Vega-Lite specs, built once for each version of the run and view.

The page refreshes every 2 s. Building a panel with Altair costs about 100-200 ms (it copies
and validates the spec as it grows), and eight panels made every refresh cost more than a
second of CPU per open tab even while the run wrote nothing. So the specs are cached with
the reads they come from, keyed on the run's version (its line count) and the view: an idle
run costs one cache lookup per refresh, and a growing run is built once per new version.

    panels = run_panels("demo", version, ("loss", "gap_s"), "step", 0.6, None, None)
    panels.charts[0]  ->  Panel(metric="loss", spec={...Vega-Lite, datasets as DataFrames},
                                zoom_rows=<x and step of the loss series>)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import streamlit as st

from ..diagnose.rules import Watch
from . import charts, reads

# Streamlit 1.67 fits a chart's title, axis and legend inside its height: these leave the
# plot about 120 px and the bucket strip's cells about 50 px
HEIGHT = 230
STRIP_HEIGHT = 250
LEGEND_HEIGHT = 80  # the first panel's legends sit above its plot, inside its height
STRIP = "buckets"  # the strip's panel name (never a metric's: it is not in `metrics`)
RANKS = "rank step time"  # per-rank seconds per step of a multi-process run (on x = step)
SYSTEM = "system: "  # the System panel's charts (system.jsonl), named "system: memory GiB"
# Smoothing is for the noisy per-batch numbers a person reads a trend from (loss, accuracy,
# perplexity); a gap, a queue, a learning rate or a bucket is read as logged, since its
# drops and jumps are the story (issue 20: EMA 0.6 drew the seed's queue drop to 0 as 1.8
# and bent the lr warm-up)
SMOOTHED = re.compile(r"loss|acc|perplex|ppl", re.IGNORECASE)
# Panels whose y starts at 0: seconds, steps and slots, where 1 ms of jitter or one slot
# must look small next to the whole
FROM_ZERO = re.compile(r"^gap_|queue", re.IGNORECASE)
# the derived gap panels (read/series.py's gaps: seconds and steps since the previous line)
GAP_METRICS = ("gap_s", "gap_steps")
# the panels of the Run page, top to bottom, when the run has them
# grad_norm and learning_rate: what other trainers' logs hold (HF, llm.c) besides the loss
DEFAULT_METRICS = ("loss", "accuracy", "hs_queue_depth", "tok_per_sec", "lr", "grad_norm",
                   "learning_rate", *GAP_METRICS)
DERIVED = " (derived)"  # a derived panel's name when the run logs a metric of its name
# watched metrics drawn by default besides the named ones: an HF run's train_loss, eval_loss
# and train/loss, never every per-layer loss of a run that logs hundreds
WATCHED_PANELS = 6


def smoothed(metric: str) -> bool:
    return bool(SMOOTHED.search(metric)) and metric not in GAP_METRICS


def from_zero(metric: str) -> bool:
    return bool(FROM_ZERO.search(metric))


def gap_panels(names) -> dict[str, str]:
    """The derived gap panels of a run whose own metrics are ``names``, each with the gap it
    draws: "gap_s", unless the run logs its own gap_s, which is charted as the metric it is;
    the derived panel is then "gap_s (derived)" (as a detector's column ``t`` once hid a
    user's own ``t``, a name of ours must not hide a user's metric)::

        gap_panels(["loss"])           ->  {"gap_s": "gap_s", "gap_steps": "gap_steps"}
        gap_panels(["loss", "gap_s"])  ->  {"gap_s (derived)": "gap_s", "gap_steps": "gap_steps"}
    """
    return {(gap + DERIVED if gap in names else gap): gap for gap in GAP_METRICS}


def default_panels(options: list[str], watch: Watch | None = None) -> list[str]:
    """The default panels among a run's ``options``, in the page's order; a derived gap named
    apart (gap_panels) comes right after the run's own metric of its name. The metrics
    diagnosis watches (``watch``: the loss_metrics and accuracy_metrics settings) come first,
    so a run whose loss is ``train/loss`` (TensorBoard) or ``train_loss`` draws the curve its
    incidents are about, not only the gap panels (issue 20)::

        default_panels(["train/loss", "lr", "gap_s", "gap_steps"], Watch("*loss*"))
            -> ["train/loss", "lr", "gap_s", "gap_steps"]
    """
    named = [name for m in DEFAULT_METRICS for name in (m, m + DERIVED) if name in options]
    gaps = {*GAP_METRICS, *(g + DERIVED for g in GAP_METRICS)}
    globbed = [m for m in options if m not in named and m not in gaps
               and watch is not None and watch.kind_of(m)]
    return _in_order(named, globbed[:WATCHED_PANELS])


def _in_order(named: list[str], globbed: list[str]) -> list[str]:
    """The watched panels right after the named loss and accuracy, before the rest (lr,
    queue, gaps): the curve an incident is about sits at the top."""
    head = [m for m in named if m in ("loss", "accuracy")]
    return [*head, *globbed, *(m for m in named if m not in head)]


@dataclass
class Panel:
    metric: str                # a metric, a gap panel, or STRIP
    spec: dict                 # what st.vega_lite_chart draws
    height: int
    zoom_rows: pd.DataFrame    # x and step of what it draws: a brush on x becomes steps


@dataclass
class Panels:
    lines: int                 # lines of the run in the range
    full: bool                 # one point per line (nothing bucketed)
    charts: list[Panel] = field(default_factory=list)
    x_domain: list[float] | None = None  # the x range every panel shares (the System panel's)


@st.cache_data(max_entries=64, show_spinner=False)
def run_panels(run: str, version: tuple, metrics: tuple, x: str, smooth: float, lo, hi,
               ) -> Panels:
    """Every panel of the Run page for these metrics and this view, in the page's order, the
    bucket strip under the loss chart."""
    gaps = gap_panels(reads.metric_names(run, version))
    series, frame, marks, strip = _read(run, version, metrics, gaps, (lo, hi, x))
    marks = _saves_to_next_line(marks, frame) if x == "step" else marks
    domain = _x_domain(frame, x, lo, hi)
    typical = reads.typical_gap(run, version)
    drawn = [m for m in metrics if (frame["metric"] == m).any()] if not frame.empty else []
    out = Panels(series.lines, series.full, x_domain=domain)
    for metric in drawn:
        first = metric == drawn[0]
        height = HEIGHT + (LEGEND_HEIGHT if first else 0)
        chart = charts.metric_chart(frame, metric, x=x, smooth=smooth if smoothed(metric) else 0,
                                    markers=marks, height=height, x_domain=domain,
                                    legend=first, from_zero=from_zero(metric),
                                    reference=typical if gaps.get(metric) == "gap_s" else None)
        rows = frame.loc[frame["metric"] == metric, ["x", "step"]]
        out.charts.append(Panel(metric, charts.vega_lite(chart), height, rows))
        if metric == "loss" and not strip.empty:
            chart = charts.bucket_strip(strip, x=x, x_domain=domain, height=STRIP_HEIGHT)
            out.charts.append(Panel(STRIP, charts.vega_lite(chart), STRIP_HEIGHT,
                                    pd.DataFrame({"x": strip["x0"], "step": strip["step"]})))
    ranks = reads.rank_times(run, version) if x == "step" else pd.DataFrame()
    if not ranks.empty:
        shown = ranks[(ranks["step"] >= (lo if lo is not None else -2**63))
                      & (ranks["step"] <= (hi if hi is not None else 2**63 - 1))]
        if not shown.empty:
            height = HEIGHT + LEGEND_HEIGHT  # its rank legend sits above the plot
            chart = charts.rank_chart(shown, x_domain=domain, height=height)
            out.charts.append(Panel(RANKS, charts.vega_lite(chart), height,
                                    shown[["step"]].assign(x=shown["step"])))
    return out


@st.cache_data(max_entries=64, show_spinner=False)
def system_panels(run: str, version: tuple, x: str, lo, hi, domain: tuple | None
                  ) -> list[Panel]:
    """The System panel's charts (CPU and GPU use, memory, disk), on the x range of the
    loss panels (``domain``); none for a run without samples. ``version`` is the samples'
    own (read/system.py): they come on through a stall, when no training line does."""
    from ..read import system

    rows = reads.system_series(run, version, x, lo, hi)
    out = []
    for name in system.CHARTS:
        part = rows[rows["chart"] == name]
        if not part.empty:
            chart = charts.system_chart(part, name, x=x, height=HEIGHT + LEGEND_HEIGHT,
                                        x_domain=list(domain) if domain else None)
            out.append(Panel(SYSTEM + name, charts.vega_lite(chart), HEIGHT + LEGEND_HEIGHT,
                             part[["x", "step"]]))
    return out


def _read(run: str, version: tuple, metrics: tuple, gaps: dict[str, str], where: tuple):
    """The frames of every panel, from the readers' caches while the run has no new lines;
    the derived gaps named as their panels (``gaps``: gap_panels())."""
    lo, hi, x = where
    plain = tuple(m for m in metrics if m not in gaps)
    wanted = any(m in gaps for m in metrics)
    series = reads.series(run, version, plain, lo, hi, x, gaps=wanted)  # one read for both
    # read/series.py names a derived gap "~gap_s" in a frame that holds the run's own gap_s
    names = {("~" + gap if gap in plain else gap): panel for panel, gap in gaps.items()
             if panel != gap}
    frame = series.frame.assign(metric=series.frame["metric"].replace(names)) if names \
        else series.frame
    return (series, frame, reads.markers(run, version, lo, hi, x),
            reads.strip(run, version, lo, hi, x))


def _saves_to_next_line(marks: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """On a step axis a checkpoint inside one step spans to the next step drawn after it:
    the steps the save kept from being logged (issue 20: the seed's 155 s save at step 2000
    was a hairline, and its next line is at step 2027). A long run's frame is bucketed, so
    the end is the next bucket's start: off by less than a bucket, a pixel or so."""
    saves = (marks["kind"] == "checkpoint") & (marks["x1"] == marks["x0"]) if not marks.empty \
        else pd.Series(dtype=bool)
    if not saves.any() or frame.empty:
        return marks
    steps = np.unique(frame["step"].to_numpy(dtype=float))
    at = np.searchsorted(steps, marks.loc[saves, "x0"].to_numpy(dtype=float), side="right")
    found = at < len(steps)
    ends = marks.loc[saves, "x1"].to_numpy(dtype=float).copy()
    ends[found] = steps[at[found]]
    out = marks.copy()
    out.loc[saves, "x1"] = ends
    return out


def _x_domain(frame: pd.DataFrame, x: str, lo, hi) -> list[float] | None:
    """The x range every panel shares: the zoom's steps, else what the series span."""
    if x == "step" and lo is not None and hi is not None:
        return [float(lo), float(hi)]
    if frame.empty:
        return None
    return [float(frame["x"].min()), float(frame["x"].max())]
