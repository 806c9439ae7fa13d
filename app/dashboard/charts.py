"""Chart builders: pure functions from the reader frames (see app/read) to Altair charts,
testable without Streamlit.

    metric_chart(series.frame, "loss", smooth=0.6, markers=marks, x_domain=(0, 4499))
      -> a layer: the markers (under the lines), min/max band (only when bucketed), the
         logged line (through each bucket's min and max when bucketed), the debiased EMA as
         a thin dark trend when smoothing, invisible hover points carrying the tooltip and an
         optional reference rule; an interval brush on x named "zoom" for
         st.altair_chart(on_select=...)

Every x a builder gets is in the run's x unit ("step", "elapsed" seconds, "time" Unix seconds);
x="time" is drawn on a temporal axis, so those seconds become milliseconds here. A metric's
name is the user's text: it is plotted as the column "value" and shown only as a title, since
Vega-Lite reads "." and "[]" in a field as nesting and Altair reads ":" as a type.

Deviation from the contract: metric_chart's default height is 220, not 160. Streamlit sizes
the whole chart (title, axis, plot) to it, and 160 left about 70 px of plot. selected_steps()
is added: it turns the brush st.altair_chart returns into the URL's from/to steps.

Only the columns a chart draws or shows in a tooltip are embedded: the Run page must stay under
1 MB in the browser (issue 9). A page shows one metric_chart per metric sharing `x_domain`
rather than one vconcat stack: Streamlit 1.67 will not fit a vconcat of layers to the
container width (it falls back to autosize "pad"), and one chart per metric keeps each brush
and each refresh separate.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

import altair as alt
import numpy as np
import pandas as pd

ZOOM = "zoom"  # the interval brush's name: st.altair_chart(...).selection["zoom"]
AXIS_TITLES = {"step": "step", "elapsed": "elapsed (s)", "time": "time"}
# Marker colours: incidents by their kind (detail), everything else by kind.
MARKER_COLORS = {"checkpoint": "#7f7f7f", "epoch": "#1f77b4", "resume": "#9467bd",
                 "spike": "#ff7f0e", "cliff": "#d62728", "stall": "#8c564b",
                 "nonfinite": "#17becf", "straggler": "#bcbd22", "alert": "#e377c2"}
SPAN_KINDS = ("checkpoint", "incident")  # drawn from x0 to x1; the rest are rules at x0
# A span narrower than this share of the x range (a checkpoint of 155 s on a 6-hour axis, a
# stall incident at one step) is drawn as a band of NARROW_PX as well, so it is seen (issue 20)
NARROW_SHARE = 0.004
NARROW_PX = 7
# A bucket id keeps its colour on every axis and every page: the colour is the id's, not the
# order in which the ids happen to appear in the data (Vega's default; issue 20)
BUCKET_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b",
                 "#b279a2", "#ff9da6", "#9d755d", "#bab0ac")
# Clock labels: 24-hour, coarser units only where the axis needs them (Vega's dynamic time
# format; its default is 12-hour, "06:44" for 18:44 with no AM/PM)
TIME_FORMAT = {"milliseconds": "%H:%M:%S.%L", "seconds": "%H:%M:%S", "minutes": "%H:%M",
               "hours": "%H:%M", "day": "%b %d", "week": "%b %d", "month": "%b %Y",
               "year": "%Y"}
# Tick labels to the data's precision: 6 significant digits, trailing zeros dropped, so a
# constant 10 reads "10" (not "10.000000") and float noise round 0.05 reads "0.05"
VALUE_FORMAT = ",.6~r"
_ALTAIR_GLOBALS = threading.Lock()
# Every panel's y axis takes the same width, so stacked panels (drawn as separate charts)
# line up on x whatever their tick labels ("0.001" vs "26,000").
# plain dicts, not alt.Axis/alt.Legend/alt.Scale: Altair deep-copies every property of those
# (some hundred each) at each layer, and a panel took 0.8 s to build instead of 0.2
Y_AXIS = dict(minExtent=56, maxExtent=56, format=VALUE_FORMAT)
SPAN_OUTLINE_PX = 2  # a span of zero width (a checkpoint inside one step) is still seen
QUICK_ROWS = 5000    # Altair's own limit on rows embedded in one chart
QUICK_COLUMNS = 5
# Milliseconds from 1970 a JavaScript Date holds (ECMA-262 "time values"): a temporal axis
# cannot place a time beyond them
JS_DATE_MAX_MS = 8.64e15


def ema(values: Sequence[float], weight: float) -> np.ndarray:
    """TensorBoard's debiased EMA (classicSmoothing in tensorboard/webapp/widgets/
    line_chart_v2/data_transformer.ts): last = last*w + (1-w)*v, divided by 1 - w**k where k
    counts the finite points so far. NaN and inf pass through and do not advance the EMA; a
    constant series comes back unchanged (tensorboard#786)."""
    y = np.asarray(values, dtype=float)
    w = float(weight) if np.isfinite(weight) else 0.0
    w = min(max(w, 0.0), 1.0)
    if y.size == 0 or np.all(y == y[0]):
        return y.copy()
    out = y.copy()
    last, count = 0.0, 0
    for i, v in enumerate(y):
        if not np.isfinite(v):
            continue
        last = last * w + (1 - w) * v
        count += 1
        out[i] = last / (1 if w == 1 else 1 - w**count)
    return out


def metric_chart(series_frame: pd.DataFrame, metric: str, *, x: str = "step",
                 smooth: float = 0.0, markers: pd.DataFrame | None = None, height: int = 220,
                 x_domain: Sequence[float] | None = None,
                 reference: float | None = None, legend: bool = True,
                 from_zero: bool = False) -> alt.LayerChart:
    """One metric of one run: a colour per attempt, markers over it, a "zoom" brush on x.

    The logged values are the strong line: where lines were bucketed it runs through each
    bucket's min and max in the order they were logged, so the seed's loss spike to 13 reads
    13, not a bucket's mean. ``smooth`` adds the EMA as a thin dark trend over it (the caller
    decides which panels may be smoothed). ``from_zero``: the y range starts at 0, so a
    millisecond of jitter in a gap or one slot of a queue stays small.

    Legends go above the plot, never beside it: a legend beside it would narrow this plot and
    not the others, and stacked panels must line up on x. A page stacking panels shows the
    legend on the first one only (``legend=False`` on the rest)."""
    rows = series_frame[series_frame["metric"] == metric]
    banded = bool((rows["n"] > 1).any())
    plotted = _metric_rows(rows, x, smooth, banded)
    x_enc = _x(x, "x", x_domain)
    scale = _y_scale(plotted, from_zero)
    y_title = _y("value:Q", metric, scale)
    many = plotted["attempt"].nunique() > 1
    attempts = dict(title="attempt", orient="top") if legend and many else None
    color = alt.Color("attempt:N", legend=attempts)
    base = alt.Chart().encode(x=x_enc, color=color)
    layers = []
    if banded:
        layers.append(base.mark_area(opacity=0.2).encode(
            y=_y("lo:Q", metric, scale), y2="hi:Q"))
    line = base.mark_line(clip=True).encode(y=y_title)
    raw = _envelope(base, x, x_domain, metric, scale) if banded else line
    layers.append(raw.add_params(alt.selection_interval(encodings=["x"], name=ZOOM)))
    if smooth > 0:
        layers.append(alt.Chart().mark_line(clip=True, color="#222", strokeWidth=1.2,
                                            opacity=0.8).encode(
            x=x_enc, y=_y("smooth:Q", metric, scale), detail="attempt:N"))
    layers.append(base.mark_point(opacity=0, size=60, clip=True).encode(
        y=y_title, tooltip=_point_tooltip(metric, x, banded)))
    series = alt.layer(*layers, data=plotted)
    marks = None if markers is None or markers.empty else markers_layer(
        markers, x=x, legend=legend, x_domain=x_domain)
    below, above = [c for c in (marks,) if c], [c for c in (_reference(reference, metric,
                                                                         scale),) if c]
    chart = alt.layer(*below, series, *above).resolve_scale(color="independent") if (
        below or above) else series
    subtitle = f"dashed: typical {reference:.3g}" if reference is not None else ""
    return chart.properties(title=alt.Title(metric, subtitle=subtitle), height=height)


def _envelope(base: alt.Chart, x: str, x_domain, metric: str, scale: dict) -> alt.Chart:
    """The logged values of bucketed lines: through each bucket's min and max in the order
    they were logged (at their own steps on a step axis), as the raw line would be drawn."""
    at = {"x": _x(x, "at", x_domain)} if x == "step" else {}
    return base.transform_fold(["lo", "hi"], as_=["end", "extreme"]).transform_calculate(
        at="datum.end == 'lo' ? datum.lo_step : datum.hi_step").mark_line(clip=True).encode(
        y=_y("extreme:Q", metric, scale), order=alt.Order("at:Q"), **at)


def markers_layer(markers: pd.DataFrame, *, x: str = "step", legend: bool = True,
                  x_domain: Sequence[float] | None = None) -> alt.LayerChart:
    """Checkpoints and incidents as spans from x0 to x1 (outlined, and a band NARROW_PX wide
    at x0 where the span is too narrow to be seen), checkpoints over incidents; epoch
    starts, resumes and alerts as thin dashed rules at x0 over them; the tooltip is `label`.
    Two legends, each showing its marks as drawn: squares for spans, dashed strokes for
    rules. A chart draws these under its lines, so no band hides a spike."""
    shown = _axis(markers[["kind", "detail", "x0", "x1", "label"]], x, ("x0", "x1"))
    shown = shown.assign(narrow=_narrow(shown, x, x_domain))
    shown = shown.sort_values("kind", key=lambda k: k == "checkpoint", kind="stable")
    spans = " || ".join(f"datum.kind == '{k}'" for k in SPAN_KINDS)
    span_scale = _marker_scale(shown[shown["kind"].isin(SPAN_KINDS)])
    rule_scale = _marker_scale(shown[~shown["kind"].isin(SPAN_KINDS)])

    def base(scale, symbols):
        top = dict(orient="top", title=None, **symbols) if legend else None
        color = alt.Color("marker:N", title="marker", scale=scale, legend=top)
        # the panel's domain: a layer without one would widen the shared x to its data
        return alt.Chart().encode(x=_x(x, "x0", x_domain), tooltip=alt.Tooltip("label:N"),
                                  color=color)

    square = base(span_scale, {"symbolType": "square"})
    rects = square.mark_rect(opacity=0.25, strokeOpacity=0.8, strokeWidth=SPAN_OUTLINE_PX,
                             clip=True).encode(x2="x1", stroke=alt.Stroke(
                                 "marker:N", scale=span_scale, legend=None))
    bands = square.mark_rule(strokeWidth=NARROW_PX, opacity=0.35, clip=True).encode(
        color=alt.Color("marker:N", scale=span_scale, legend=None))
    rules = base(rule_scale, {"symbolType": "stroke", "symbolDash": [4, 3],
                              "symbolStrokeWidth": 2}).mark_rule(
        strokeWidth=1.5, strokeDash=[4, 3], clip=True)
    # one mark per shape, few layers: Altair copies every layer at each level it is nested in
    # (a panel cost 0.8 s with a layer per kind). Checkpoints come after incidents in the
    # data, so Vega draws them on top.
    return alt.layer(rects.transform_filter(spans), bands.transform_filter(
        f"datum.narrow && ({spans})"), rules.transform_filter(f"!({spans})"), data=shown
    ).transform_calculate(
        marker="datum.kind == 'incident' ? datum.detail : datum.kind").resolve_scale(
        color="independent")


def _narrow(shown: pd.DataFrame, x: str, x_domain: Sequence[float] | None) -> pd.Series:
    """Which spans would be a hairline: narrower than NARROW_SHARE of the x range."""
    width = (shown["x1"] - shown["x0"]).fillna(0.0)
    if x_domain is None or len(x_domain) != 2:
        return width <= 0
    extent = abs(float(x_domain[1]) - float(x_domain[0])) * (1000 if x == "time" else 1)
    return width <= NARROW_SHARE * extent if np.isfinite(extent) else width <= 0


def _marker_scale(shown: pd.DataFrame) -> dict:
    """The marker colours, listing in the legend only what this run has."""
    names = shown["detail"].where(shown["kind"] == "incident", shown["kind"])
    present = [m for m in MARKER_COLORS if m in set(names)]
    present += sorted(set(names) - set(present))  # an incident kind of a later issue
    return dict(domain=present, range=[MARKER_COLORS.get(m, "#bcbd22") for m in present])


def bucket_strip(strip: pd.DataFrame, *, x: str = "step",
                 x_domain: Sequence[float] | None = None, height: int = 36) -> alt.Chart:
    """One cell per micro-batch (or per merged group of them), coloured by bucket; a merged
    cell is as opaque as its most common bucket's share, so a run of one bucket stands out."""
    cells = _axis(strip[["x0", "x1", "step", "micro", "bucket", "share"]], x, ("x0", "x1"))
    strip_chart = alt.Chart(cells, height=height, title="buckets").mark_rect(clip=True)
    return strip_chart.transform_calculate(bottom="0", top="1").encode(
        x=_x(x, "x0", x_domain), x2="x1",
        # a y axis as wide as the panels' above, so x lines up
        y=alt.Y("bottom:Q", title=None, scale=dict(domain=[0, 1]),
                axis=dict(minExtent=Y_AXIS["minExtent"], maxExtent=Y_AXIS["maxExtent"],
                              labels=False, ticks=False, grid=False, domain=False)),
        y2="top:Q",
        color=alt.Color("bucket:N", legend=dict(orient="top"), scale=_bucket_scale(cells)),
        opacity=alt.Opacity("share:Q", scale=dict(domain=[0, 1], range=[0.15, 1]),
                            legend=None),
        tooltip=["step:Q", "micro:Q", "bucket:N", alt.Tooltip("share:Q", format=".0%")])


def _bucket_scale(cells: pd.DataFrame) -> dict:
    """Bucket colours by id (BUCKET_COLORS), listed in id order."""
    ids = sorted(set(cells["bucket"].dropna()), key=_bucket_order)
    # the data's own values (a number is not its text to Vega's ordinal scale)
    return dict(domain=[b.item() if hasattr(b, "item") else b for b in ids],
                     range=[BUCKET_COLORS[_bucket_index(b) % len(BUCKET_COLORS)] for b in ids])


def _bucket_order(bucket) -> tuple:
    try:
        return (0, float(bucket), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(bucket))


def _bucket_index(bucket) -> int:
    """An integer id's own index; any other id's a stable hash of its text."""
    try:
        return int(float(bucket))
    except (TypeError, ValueError, OverflowError):
        return int(hashlib.sha1(str(bucket).encode()).hexdigest()[:8], 16)


def rank_chart(times: pd.DataFrame, *, x_domain: Sequence[float] | None = None,
               height: int = 230) -> alt.Chart:
    """Seconds per step of each rank on the step axis (app/read/ranks.py): a straggler is the
    line above the others."""
    rows = times[["rank", "attempt", "step", "seconds_per_step", "fastest", "slowest"]]
    return alt.Chart(rows, height=height, title="seconds per step, by rank").mark_line(
        clip=True, point=len(rows) < 60).encode(
        x=_x("step", "step", x_domain), y=_y("seconds_per_step", "s per step"),
        color=alt.Color("rank:N", legend=dict(orient="top")),
        detail="attempt:N",
        tooltip=["rank:N", "attempt:Q", "step:Q", alt.Tooltip("seconds_per_step:Q", format=".3f"),
                 alt.Tooltip("fastest:Q", format=".3f"), alt.Tooltip("slowest:Q", format=".3f")])


def system_chart(rows: pd.DataFrame, title: str, *, x: str = "step",
                 x_domain: Sequence[float] | None = None, height: int = 230) -> alt.Chart:
    """One chart of the System panel (app/read/system.py's rows of one ``chart``): a line
    per series (host CPU, each GPU, ...) on the page's x, titled with its unit; the tooltip
    gives a bucket's mean, its peak and its samples."""
    plotted = _axis(rows[["series", "x", "step", "value", "peak", "n"]], x, ("x",))
    return alt.Chart(plotted, height=height, title=f"system: {title}").mark_line(
        clip=True, point=len(plotted) < 60).encode(
        x=_x(x, "x", x_domain), y=_y("value", title, dict(zero=True)),
        color=alt.Color("series:N", legend=dict(orient="top", title=None)),
        tooltip=["series:N", alt.Tooltip("step:Q", title="step"),
                 alt.Tooltip("value:Q", format=".4g", title="mean"),
                 alt.Tooltip("peak:Q", format=".4g"), alt.Tooltip("n:Q", title="samples")])


def vega_lite(chart: alt.TopLevelMixin) -> dict:
    """The chart as the Vega-Lite dict ``st.vega_lite_chart`` draws, each dataset a DataFrame
    (Streamlit sends it as Arrow), as ``st.altair_chart`` would make it but without checking
    the spec against the schema again: the builders above make only valid specs, and the
    check took half of a panel's time. Every page draws through this (never
    ``st.altair_chart``, whose conversion switches the same process-wide settings under a
    lock of its own)."""
    datasets: dict[str, pd.DataFrame] = {}
    alt.data_transformers.register("cliffwatch_frames", _named_frame)
    # Altair's data transformer and theme are process-wide; sessions draw in their own threads
    with _ALTAIR_GLOBALS, alt.theme.enable("none"), \
            alt.data_transformers.enable("cliffwatch_frames", datasets=datasets):
        spec = chart.to_dict(validate=False)
    spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    return spec


def _named_frame(data, datasets: dict) -> dict:
    """A data transformer: the frame itself, named by its content (equal frames are sent once)."""
    frame = pd.DataFrame(data)
    digest = hashlib.sha1(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    digest.update("\0".join(map(str, frame.columns)).encode())
    name = f"data-{digest.hexdigest()[:16]}"
    datasets[name] = frame
    return {"name": name}


# Tableau 10: ten colours told apart on a white page (Vega's "tableau10" scheme)
RUN_COLORS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
              "#ff9da6", "#9d755d", "#bab0ac"]


# The compare chart's height. Streamlit fits title, axes and legend inside the height it is
# given, and this legend is a row per run under the plot: the default height left a plot of
# 40 px for five runs (seen in a review of the pages), so the height grows with the runs.
COMPARE_PLOT_PX, COMPARE_AXES_PX, LEGEND_ROW_PX = 260, 130, 22


def compare_height(runs: int) -> int:
    """The height to draw compare_chart of ``runs`` runs: plot, title and axes, and the
    legend's rows (one per run, and its title)."""
    return COMPARE_PLOT_PX + COMPARE_AXES_PX + LEGEND_ROW_PX * (runs + 1)


def compare_chart(frames: dict[str, pd.DataFrame], metric: str, *,
                  x: str = "step") -> alt.Chart | alt.LayerChart:
    """One metric of several runs overlaid, a colour per run and a line per attempt; where
    any run's series was bucketed, the min/max band, and each line through its buckets' min
    and max as the Run page draws it (metric_chart), so the seed's spike to 13 reads 13 here
    too, not a bucket's mean of 7. Draw it ``compare_height(len(frames))`` high."""
    columns = ["x", "attempt", "value", "lo", "hi", "lo_step", "hi_step", "n"]
    parts = [f.loc[f["metric"] == metric, columns].assign(run=run) for run, f in frames.items()]
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*columns, "run"])
    banded = bool((rows["n"] > 1).any())
    keep = ["run", "attempt", "x", "value"] + (["lo", "hi", "lo_step", "hi_step"]
                                               if banded else [])
    plotted = _axis(rows[keep], x, ("x",))
    y_title = _y("value:Q", metric)
    # a categorical palette, one distinct colour per run (Streamlit's theme drew two runs in
    # two blues, issue 20 item 8), and each run's full name in the legend (no label limit),
    # under the chart, so that long names do not narrow the plot
    color = alt.Color("run:N", scale=dict(range=RUN_COLORS),
                      legend=dict(labelLimit=0, symbolOpacity=1, symbolStrokeWidth=3,
                                        orient="bottom", direction="vertical"))
    base = alt.Chart().encode(x=_x(x, "x"), color=color, detail="attempt:N")
    tips = ["run:N", "attempt:N", alt.Tooltip("value:Q", title=metric)]
    line = base.mark_line().encode(y=y_title, tooltip=tips)
    drawn = _envelope(base, x, None, metric, {}) if banded else line
    layers = [drawn.add_params(alt.selection_interval(encodings=["x"], name=ZOOM))]
    if banded:
        layers.insert(0, base.mark_area(opacity=0.15).encode(
            y=_y("lo:Q", metric), y2="hi:Q"))
        layers.append(base.mark_point(opacity=0, size=60).encode(y=y_title, tooltip=tips))
    return alt.layer(*layers, data=plotted).properties(title=metric)


def quick_chart(result: pd.DataFrame) -> alt.Chart | None:
    """The SQL page's chart: up to five numeric columns against the first column (a line when
    that is a number or a time, bars when it is a label, the row number when it is the only
    number). None when there is nothing to draw. Columns become values of "column", since
    their names are SQL text."""
    numeric = [c for c in result.columns if pd.api.types.is_numeric_dtype(result[c])
               and not pd.api.types.is_bool_dtype(result[c])]
    if len(result) < 2 or not numeric:
        return None
    rows = result.head(QUICK_ROWS)
    x_values, x_type, x_title, ys = _quick_x(rows, numeric)
    long = pd.concat([pd.DataFrame({"x": x_values.to_numpy(), "column": str(c),
                                    "value": rows[c].astype(float).to_numpy()})
                      for c in ys[:QUICK_COLUMNS]], ignore_index=True)
    chart = alt.Chart(long)
    chart = chart.mark_bar() if x_type == "N" else chart.mark_line(point=len(rows) <= 50)
    capped = f" (first {QUICK_ROWS:,} rows)" if len(result) > QUICK_ROWS else ""
    encoding = {"xOffset": "column:N"} if x_type == "N" else {}
    return chart.encode(
        x=alt.X(f"x:{x_type}", title=x_title), y=alt.Y("value:Q", title=None),
        color=alt.Color("column:N", title="column"),
        tooltip=[alt.Tooltip(f"x:{x_type}", title=x_title), "column:N", "value:Q"],
        **encoding).properties(title=f"quick chart{capped}")


def _quick_x(rows: pd.DataFrame, numeric: list) -> tuple[pd.Series, str, str, list]:
    """The quick chart's x (values, Vega-Lite type, title) and the columns drawn against it."""
    first = rows.columns[0]
    if pd.api.types.is_datetime64_any_dtype(rows[first]):
        return rows[first], "T", str(first), numeric
    if first in numeric and len(numeric) > 1:
        return rows[first], "Q", str(first), [c for c in numeric if c != first]
    if first not in numeric:
        return rows[first].astype(str), "N", str(first), numeric
    return pd.Series(range(len(rows))), "Q", "row", numeric


def selected_steps(zoom: dict, frame: pd.DataFrame, x: str = "step") -> tuple[int, int] | None:
    """The step range (inclusive) under a "zoom" brush, as the URL's from/to want it.

    `zoom` is what st.altair_chart returns for the brush: {field: [a, b]} in the axis unit
    (milliseconds for x="time"), {} when cleared. For elapsed and time, the steps are those
    of the rows of `frame` (a series frame) the brush covers."""
    extent = _brushed(zoom)
    if extent is None:
        return None
    a, b = sorted(float(pd.Timestamp(v).value / 1e6) if isinstance(v, str) else float(v)
                  for v in extent)
    if x == "time":
        a, b = a / 1000, b / 1000
    if x == "step":
        lo, hi = int(np.floor(a)), int(np.ceil(b))
    else:
        inside = frame[(frame["x"] >= a) & (frame["x"] <= b)]
        if inside.empty:
            return None
        lo, hi = int(inside["step"].min()), int(inside["step"].max())
    # a brush of no width (a click, or a drag on a chart drawn before its data: CI, stop 36,
    # zoomed the page on steps 0-0) or over one line zooms on nothing a line could show
    return (lo, hi) if lo < hi else None


def _brushed(zoom: dict | None) -> list | None:
    """The x-only brush's [a, b], under whichever field its layer draws x with: "x", or "at"
    where lines were bucketed (the envelope's steps). Reading only "x" lost every drag on a
    run past 2,000 lines (stop 33)."""
    extents = [v for v in (zoom or {}).values() if isinstance(v, list) and len(v) == 2]
    return extents[0] if len(extents) == 1 else None


def _metric_rows(rows: pd.DataFrame, x: str, smooth: float, banded: bool) -> pd.DataFrame:
    """The columns a metric chart embeds: no lo/hi unless a band is drawn, no step unless it
    differs from x, the EMA per attempt when smoothing."""
    keep = ["attempt", "x", "value"] + (["lo", "hi", "n", "lo_step", "hi_step"] if banded else [])
    keep += [] if x == "step" and not banded else ["step"]
    plotted = _axis(rows[keep], x, ("x",))
    if smooth > 0:
        plotted["smooth"] = plotted.groupby("attempt")["value"].transform(
            lambda values: ema(values.to_numpy(), smooth))
    return plotted


def _point_tooltip(metric: str, x: str, banded: bool) -> list:
    tips = [alt.Tooltip("step:Q" if x != "step" or banded else "x:Q", title="step"),
            alt.Tooltip("value:Q", title=metric + (" (mean)" if banded else ""))]
    if x != "step":
        tips.append(alt.Tooltip("x:T" if x == "time" else "x:Q", title=AXIS_TITLES[x],
                                **({"format": "%Y-%m-%d %H:%M:%S"} if x == "time" else {})))
    if banded:
        tips += [alt.Tooltip("lo:Q", title="min"), alt.Tooltip("hi:Q", title="max"),
                 alt.Tooltip("n:Q", title="lines")]
    return [*tips, "attempt:N"]


def _y(field: str, title: str, scale: dict | None = None) -> alt.Y:
    """A panel's y: no axis title (the panel's title names the metric, and a long name turned
    on its side would take the plot's height: Streamlit fits title, legend and axes inside a
    chart's height), and an axis of fixed width, so stacked panels line up on x."""
    del title  # named in the chart's title and the tooltip
    return alt.Y(field, title=None, scale=scale or dict(zero=False), axis=Y_AXIS)


def _y_scale(plotted: pd.DataFrame, from_zero: bool) -> dict:
    """The y range: from 0 when asked; a series constant to float noise (a gap of
    0.049999999995 s, a constant 10) spans ±5% of its value (±1 at 0) rather than a range
    Vega would fill with ticks ten digits long."""
    if from_zero:
        return dict(zero=True)
    values = pd.concat([plotted[c] for c in ("value", "lo", "hi") if c in plotted])
    values = values[np.isfinite(values.to_numpy(dtype=float))]
    if values.empty:
        return dict(zero=False)
    low, high = float(values.min()), float(values.max())
    middle = (low + high) / 2
    if high - low > 1e-9 * max(abs(middle), 1e-300):
        return dict(zero=False)
    pad = abs(middle) * 0.05 or 1.0
    return dict(domain=[middle - pad, middle + pad], nice=False, zero=False)


def _reference(value: float | None, metric: str, scale: dict | None = None
               ) -> alt.Chart | None:
    if value is None:
        return None
    return alt.Chart(pd.DataFrame({"typical": [float(value)]})).mark_rule(
        color="#555", strokeDash=[6, 3]).encode(
        y=_y("typical:Q", metric, scale),
        tooltip=alt.Tooltip("typical:Q", title="typical", format=".3g"))


def _x(x: str, field: str, domain: Sequence[float] | None = None) -> alt.X:
    """The x encoding of every layer; one title, since a layer joins its layers' titles."""
    kind = "T" if x == "time" else "Q"
    shown = None if domain is None else [v * 1000 for v in domain] if x == "time" else list(domain)
    if shown is not None and not _drawable(pd.Series(shown, dtype=float), x).all():
        shown = None  # an end at inf (a log's "time": Infinity) is no domain: fit the data
    if shown is not None and x == "time":
        shown = _dates(shown)
    # nice=False: the range asked for (the URL's from/to) is the range drawn, not rounded out
    scale = dict() if shown is None else dict(domain=shown, nice=False)
    axis = dict(format=TIME_FORMAT) if x == "time" else dict(format=VALUE_FORMAT)
    return alt.X(f"{field}:{kind}", title=AXIS_TITLES.get(x, x), scale=scale, axis=axis)


def _axis(frame: pd.DataFrame, x: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """A copy with Unix seconds turned into the milliseconds a temporal axis reads, rows at
    ±inf on x left out, and integer columns narrowed (Streamlit sends frames as Arrow: fewer
    bytes)."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_integer_dtype(out[col]):
            out[col] = pd.to_numeric(out[col], downcast="integer")
    if x == "time":
        for col in columns:
            out[col] = out[col].astype(float) * 1000
    # a row at inf has no place on x and would stretch the axis to it ("time": Infinity in
    # a log); a missing x (NaN: a rule marker's end) is Vega's to skip
    placed = pd.Series(True, index=out.index)
    for col in columns:
        values = out[col].astype(float)
        placed &= values.isna() | _drawable(values, x)
    return out if placed.all() else out[placed].reset_index(drop=True)


def _dates(milliseconds: list[float]) -> list[alt.DateTime] | None:
    """A temporal domain as Vega-Lite DateTime objects (UTC): Streamlit's chart draws a time
    axis whose domain is plain milliseconds from NaN to NaN (seen in Chromium; vl-convert
    draws either). None for a date Python cannot hold (past the year 9999): fit the data."""
    try:
        dates = [datetime.fromtimestamp(ms / 1000, tz=UTC) for ms in milliseconds]
    except (OverflowError, OSError, ValueError):
        return None
    return [alt.DateTime(year=d.year, month=d.month, date=d.day, hours=d.hour,
                         minutes=d.minute, seconds=d.second,
                         milliseconds=d.microsecond // 1000, utc=True) for d in dates]


def _drawable(values: pd.Series, x: str) -> pd.Series:
    """Which x values (in the axis unit) an axis can place: finite, and for time within what
    a JavaScript Date holds."""
    finite = pd.Series(np.isfinite(values.to_numpy(dtype=float)), index=values.index)
    return finite & (values.abs() <= JS_DATE_MAX_MS) if x == "time" else finite
