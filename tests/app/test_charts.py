"""Chart builders are pure functions: frames in the contract's shapes in, a Vega-Lite spec out.
Where position matters the spec is laid out by vl-convert (Vega itself, no browser) and the
marks are read back from its scenegraph."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import vl_convert

from app.dashboard import charts, export

SEED = Path(__file__).resolve().parents[2] / "samples" / "seed-cliff"
WIDTH = 1000  # px of the plot, so that a pixel maps back to x by one factor


def series_frame(rows: list[dict], metric: str = "loss", x: str = "step") -> pd.DataFrame:
    """A full-resolution Series.frame (one row per line) from metric lines."""
    xs = {"step": "step", "elapsed": "elapsed_s"}[x]
    return pd.DataFrame({
        "metric": metric, "attempt": [r.get("attempt", 1) for r in rows],
        "x": [float(r[xs]) for r in rows], "step": [r["step"] for r in rows],
        "value": [r[metric] for r in rows], "lo": [r[metric] for r in rows],
        "hi": [r[metric] for r in rows], "lo_step": [r["step"] for r in rows],
        "hi_step": [r["step"] for r in rows], "n": 1, "nonfinite": 0})


def seed_lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (SEED / name).read_text().splitlines()]


def seed_markers(x: str) -> pd.DataFrame:
    """The markers frame of app.read.markers, built by hand from the seed's events: a
    checkpoint spans its checkpoint_start..checkpoint_end, an epoch start is a rule."""
    unit = {"step": "step", "elapsed": "elapsed_s"}[x]
    rows, started = [], {}
    for event in seed_lines("events.jsonl"):
        if event["event"] == "checkpoint_start":
            started[event["path"]] = event
        elif event["event"] == "checkpoint_end":
            start = started.pop(event["path"])
            rows.append(("checkpoint", "", start[unit], event[unit], start["step"],
                         event["step"], f"checkpoint {event['path']}: blocked "
                         f"{event['blocked_s']} s"))
        elif event["event"] == "epoch_start":
            rows.append(("epoch", "", event[unit], event[unit], event["step"], event["step"],
                         f"epoch {event['epoch']} starts"))
    return pd.DataFrame(rows, columns=["kind", "detail", "x0", "x1", "step", "end_step",
                                       "label"]).astype({"x0": float, "x1": float})


def scene_nodes(chart) -> list[dict]:
    """Every dict of the scenegraph Vega lays the chart out as, outermost first."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(vl_convert.vegalite_to_scenegraph(chart.to_dict(), vl_version=export.VL_VERSION))
    return found


def drawn(chart) -> list[tuple[str, list[dict]]]:
    """(mark type, items) of every data mark, as Vega lays the chart out."""
    return [(node["marktype"], node.get("items", [])) for node in scene_nodes(chart)
            if str(node.get("name")).endswith("marks")]  # "marks", "layer_0_marks"


def items(chart, marktype: str, stroke: str | None = None) -> list[dict]:
    return [item for kind, found in drawn(chart) if kind == marktype for item in found
            if stroke is None or item.get("stroke") == stroke]


def datasets(spec: dict) -> list[list[dict]]:
    return list(spec["datasets"].values())


def layers(spec: dict) -> list[dict]:
    """Every unit spec of a (nested) layer."""
    if "layer" not in spec:
        return [spec]
    return [unit for child in spec["layer"] for unit in layers(child)]


# -- the EMA ---------------------------------------------------------------------------------

def test_ema_matches_tensorboard_by_hand():
    """weight 0.6: last = 0.4 -> 0.4/0.4; 0.4*0.6 + 0.4*2 = 1.04 -> 1.04/0.64;
    1.04*0.6 + 0.4*3 = 1.824 -> 1.824/0.784."""
    assert charts.ema([1, 2, 3], 0.6) == pytest.approx([1.0, 1.625, 2.326530612244898])


def test_ema_skips_nonfinite_points_without_advancing():
    """NaN and inf pass through; the next finite point is smoothed as if they were not there
    (the debias count is of finite points), as TensorBoard's classicSmoothing does."""
    out = charts.ema([1, np.nan, 2, np.inf, 3], 0.6)
    assert np.isnan(out[1]) and np.isinf(out[3])
    assert out[[0, 2, 4]] == pytest.approx([1.0, 1.625, 2.326530612244898])


@pytest.mark.parametrize(("values", "weight", "expected"), [
    ([2.0, 2.0, 2.0], 0.9, [2.0, 2.0, 2.0]),   # constant: unchanged (tensorboard#786)
    ([1.0, 5.0, 3.0], 0.0, [1.0, 5.0, 3.0]),   # no smoothing
    ([1.0, 5.0], 1.0, [0.0, 0.0]),             # weight 1: TensorBoard's flat line
    ([], 0.6, []),
])
def test_ema_edges(values, weight, expected):
    assert list(charts.ema(values, weight)) == pytest.approx(expected)


# -- metric charts --------------------------------------------------------------------------

def frame(values=(2.0, 1.5, 9.0, 1.2), n=(1, 1, 1, 1), metric="loss") -> pd.DataFrame:
    steps = [1, 2, 3, 4]
    return pd.DataFrame({"metric": metric, "attempt": [1, 1, 2, 2], "x": [1.0, 2.0, 3.0, 4.0],
                         "step": steps, "value": list(values), "lo": [v - 1 for v in values],
                         "hi": [v + 1 for v in values], "lo_step": steps, "hi_step": steps,
                         "n": list(n), "nonfinite": 0})


def test_metric_chart_draws_a_line_per_attempt_with_a_zoom_brush():
    spec = charts.metric_chart(frame(), "loss").to_dict()
    units = layers(spec)
    assert [u["mark"]["type"] for u in units] == ["line", "point"]
    assert units[0]["encoding"]["color"]["field"] == "attempt"
    assert spec["title"]["text"] == "loss"
    (zoom,) = spec["params"]
    assert zoom["name"] == charts.ZOOM == "zoom"
    assert zoom["select"] == {"type": "interval", "encodings": ["x"]}


def test_band_only_when_some_bucket_holds_more_than_one_line():
    full = charts.metric_chart(frame(), "loss").to_dict()
    assert "area" not in [u["mark"]["type"] for u in layers(full)]
    assert set(datasets(full)[0][0]) == {"attempt", "x", "value"}  # no unused column embedded
    bucketed = charts.metric_chart(frame(n=(1, 5, 1, 1)), "loss").to_dict()
    band = layers(bucketed)[0]
    assert band["mark"]["type"] == "area"
    assert (band["encoding"]["y"]["field"], band["encoding"]["y2"]["field"]) == ("lo", "hi")
    assert [r["hi"] for r in datasets(bucketed)[0]] == [3.0, 2.5, 10.0, 2.2]


def test_smoothing_draws_the_ema_thin_over_the_raw_line_per_attempt():
    """The logged line stays the strong one (issue 20): the EMA is a thin trend over it."""
    spec = charts.metric_chart(frame(), "loss", smooth=0.6).to_dict()
    raw, smooth = [u for u in layers(spec) if u["mark"]["type"] == "line"]
    assert raw["mark"].get("opacity", 1) == 1 and smooth["mark"]["opacity"] < 1
    assert smooth["mark"]["strokeWidth"] < 2
    assert smooth["encoding"]["y"]["field"] == "smooth"
    rows = datasets(spec)[0]
    # attempts are smoothed apart: attempt 2 starts afresh at its own first value
    assert [r["smooth"] for r in rows] == pytest.approx(
        [*charts.ema([2.0, 1.5], 0.6), *charts.ema([9.0, 1.2], 0.6)])


def ms_of(date: dict) -> float:
    """Milliseconds since 1970 of a Vega-Lite DateTime object (UTC)."""
    assert date["utc"] is True
    when = datetime(date["year"], date["month"], date["date"], date["hours"], date["minutes"],
                    date["seconds"], date["milliseconds"] * 1000, tzinfo=UTC)
    return when.timestamp() * 1000


def test_time_axis_is_temporal_in_milliseconds():
    f = frame().assign(x=[1.7e9, 1.7e9 + 5, 1.7e9 + 10, 1.7e9 + 15])
    marks = pd.DataFrame({"kind": ["epoch"], "detail": [""], "x0": [1.7e9 + 5],
                          "x1": [1.7e9 + 5], "step": [2], "end_step": [2], "label": ["e"]})
    chart = charts.metric_chart(f, "loss", x="time", markers=marks,
                                x_domain=(1.7e9, 1.7e9 + 15))
    spec = chart.to_dict()
    xs = [u["encoding"]["x"] for u in layers(spec)]
    assert {x["type"] for x in xs} == {"temporal"}
    # as DateTime objects: Streamlit's chart draws a domain of plain milliseconds as NaN
    assert [ms_of(d) for d in xs[0]["scale"]["domain"]] == [1.7e12, (1.7e9 + 15) * 1000]
    by_columns = {tuple(sorted(d[0])): d for d in datasets(spec)}
    assert [r["x"] for r in by_columns[("attempt", "step", "value", "x")]][:2] == [
        1.7e12, (1.7e9 + 5) * 1000]
    assert by_columns[("detail", "kind", "label", "narrow", "x0", "x1")][0]["x0"] == (
        1.7e9 + 5) * 1000


def test_reference_line_at_the_typical_gap():
    chart = charts.metric_chart(frame(metric="gap_s"), "gap_s", reference=5.0)
    spec = chart.to_dict()
    (rule,) = [u for u in layers(spec) if u["mark"]["type"] == "rule"]
    assert rule["encoding"]["y"]["field"] == "typical"
    assert spec["datasets"][rule["data"]["name"]] == [{"typical": 5.0}]
    assert "typical 5" in spec["title"]["subtitle"]
    assert [i["y"] for i in items(chart.properties(width=WIDTH), "rule")]  # it is drawn


def test_one_dataset_per_frame():
    """Layers of one frame share one dataset; only markers and the reference add theirs."""
    chart = charts.metric_chart(frame(n=(1, 3, 1, 1)), "loss", smooth=0.6,
                                markers=seed_markers("step"), reference=1.0)
    assert len(chart.to_dict()["datasets"]) == 3


@pytest.mark.parametrize("name", ["acc.top1", "eval:loss", "loss[0]", "a\\b", "x:Q"])
def test_metric_names_with_field_syntax_are_plotted_as_they_are(name):
    """Vega-Lite reads "." and "[]" in a field as nesting and Altair reads ":" as a type:
    such a metric must still be drawn from its own values, under its own name."""
    for spec in (charts.metric_chart(frame(metric=name), name, smooth=0.5).to_dict(),
                 charts.compare_chart({"a": frame(metric=name)}, name).to_dict()):
        line = next(u for u in layers(spec) if u["mark"]["type"] == "line")
        y = line["encoding"]["y"]
        assert y["type"] == "quantitative"
        assert spec["title"] == name or spec["title"]["text"] == name
        rows = datasets(spec)[0]
        assert [vega_get(row, y["field"]) for row in rows] == [2.0, 1.5, 9.0, 1.2]
    points = next(u for u in layers(charts.metric_chart(frame(metric=name), name).to_dict())
                  if u["mark"]["type"] == "point")
    assert points["encoding"]["tooltip"][1]["title"] == name


def vega_get(row: dict, field: str):
    """A field looked up as Vega-Lite does: unescaped "." and "[...]" step into nested data."""
    path = re.findall(r"(?:\\.|[^.\[\]\\])+", field)
    value = row
    for part in path:
        value = value[re.sub(r"\\(.)", r"\1", part)]
    return value


# -- markers, laid out ------------------------------------------------------------------------

CHECKPOINT, EPOCH = charts.MARKER_COLORS["checkpoint"], charts.MARKER_COLORS["epoch"]


def test_markers_at_the_seed_events_in_elapsed_time():
    """Each checkpoint is a span exactly as wide as checkpoint_start..checkpoint_end, each
    epoch start a rule at its time."""
    marks = seed_markers("elapsed")
    loss = series_frame(seed_lines("metrics.jsonl"), x="elapsed")
    chart = charts.metric_chart(loss, "loss", x="elapsed", markers=marks,
                                x_domain=(0, 25000)).properties(width=WIDTH)
    px = WIDTH / 25000
    spans = [v / px for i in items(chart, "rect", CHECKPOINT)
             for v in (i["x"], i["x"] + i["width"])]
    assert spans == pytest.approx([10005.0, 10160.2, 20042.2, 20142.2])
    rules = [i["x"] / px for i in items(chart, "rule", EPOCH)]
    assert rules == pytest.approx([0.0, 10601.2, 21193.2])
    # the label travels with each drawn span (the scenegraph keeps it in the description)
    assert ["label: checkpoint ckpt/step-" in i["description"]
            for i in items(chart, "rect", CHECKPOINT)] == [True, True]


def test_a_checkpoint_inside_one_step_is_still_seen():
    """In steps the seed's checkpoints start and end at the same step: a span of no width,
    drawn with an outline so it shows."""
    loss = series_frame(seed_lines("metrics.jsonl"))
    chart = charts.metric_chart(loss, "loss", markers=seed_markers("step"),
                                x_domain=(0, 5000)).properties(width=WIDTH)
    px = WIDTH / 5000
    spans = items(chart, "rect", CHECKPOINT)
    assert [i["x"] / px for i in spans] == pytest.approx([2000, 4001])
    assert [i["width"] for i in spans] == [0, 0]
    assert all(i["strokeWidth"] >= charts.SPAN_OUTLINE_PX > 0 for i in spans)
    assert [i["x"] / px for i in items(chart, "rule", EPOCH)] == pytest.approx([0, 2114, 4228])


def test_incidents_are_coloured_by_kind_and_alerts_marked():
    marks = pd.DataFrame({
        "kind": ["incident", "incident", "alert", "resume"],
        "detail": ["spike", "stall", "loss_spike: firing", ""], "x0": [10.0, 20.0, 30.0, 40.0],
        "x1": [12.0, 20.0, 30.0, 40.0], "step": [10, 20, 30, 40], "end_step": [12, 20, 30, 40],
        "label": ["spike in loss", "stall", "alert", "resume"]})
    chart = charts.markers_layer(marks).properties(width=WIDTH)
    colors = charts.MARKER_COLORS
    assert [i["fill"] for i in items(chart, "rect")] == [colors["spike"], colors["stall"]]
    rules = [i for i in items(chart, "rule") if i["strokeWidth"] < charts.NARROW_PX]
    assert [i["stroke"] for i in rules] == [colors["alert"], colors["resume"]]
    # the stall, at one step, is a band of fixed width too, so it is seen (issue 20)
    bands = [i for i in items(chart, "rule") if i["strokeWidth"] == charts.NARROW_PX]
    assert [i["stroke"] for i in bands] == [colors["stall"]]
    tooltip = layers(chart.to_dict())[0]["encoding"]["tooltip"]
    assert tooltip == {"field": "label", "type": "nominal"}


# -- bucket strip ------------------------------------------------------------------------------

def seed_strip(lines: list[dict]) -> pd.DataFrame:
    """app.read.strip's frame, built by hand: a line's micro-batches split the interval from
    the previous line to this one evenly."""
    rows, previous = [], 0.0
    for line in lines:
        width = (line["step"] - previous) / len(line["buckets"])
        for micro, bucket in enumerate(line["buckets"]):
            rows.append((previous + micro * width, previous + (micro + 1) * width,
                         line["step"], micro, bucket, 1.0))
        previous = float(line["step"])
    return pd.DataFrame(rows, columns=["x0", "x1", "step", "micro", "bucket", "share"])


def test_bucket_strip_has_one_cell_per_micro_batch():
    lines = seed_lines("metrics.jsonl")[:300]  # under Altair's 5,000 embedded rows
    buckets = [b for line in lines for b in line["buckets"]]
    chart = charts.bucket_strip(seed_strip(lines)).properties(width=WIDTH)
    spec = chart.to_dict()
    assert [r["bucket"] for r in datasets(spec)[0]] == buckets
    assert spec["encoding"]["color"] == {**spec["encoding"]["color"], "field": "bucket",
                                         "type": "nominal"}
    cells = items(chart, "rect")
    assert len(cells) == len(buckets)
    # cells tile the run: each starts where the previous one ended
    assert all(a["x"] + a["width"] == pytest.approx(b["x"]) for a, b in pairwise(cells))


def test_bucket_strip_shows_merged_cells_fainter():
    strip = pd.DataFrame({"x0": [0.0, 1.0], "x1": [1.0, 2.0], "step": [1, 2], "micro": [0, 0],
                          "bucket": [3, 3], "share": [1.0, 0.25]})
    full, merged = items(charts.bucket_strip(strip), "rect")
    assert merged["opacity"] < full["opacity"]


# -- pages' helpers, compare, SQL, export -----------------------------------------------------

@pytest.mark.parametrize(("x", "zoom", "expected"), [
    ("step", {"x": [598.13, 1061.68]}, (598, 1062)),
    ("elapsed", {"x": [15.0, 31.0]}, (2, 3)),
    # Streamlit hands a temporal brush back as integer milliseconds
    ("time", {"x": [1_700_000_004_000, 1_700_000_011_000]}, (2, 3)),
    ("step", {}, None),
    ("elapsed", {"x": [100.0, 200.0]}, None),
    # no width, or one line: nothing to zoom on (CI zoomed a page on steps 0-0)
    ("step", {"x": [0.0, 0.0]}, None),
    ("step", {"x": [3.0, 3.0]}, None),
    ("elapsed", {"x": [19.0, 21.0]}, None),
])
def test_selected_steps_maps_a_brush_to_the_url_range(x, zoom, expected):
    xs = {"step": [1.0, 2.0, 3.0, 4.0], "elapsed": [5.0, 20.0, 30.0, 40.0],
          "time": [1.7e9, 1.7e9 + 5, 1.7e9 + 10, 1.7e9 + 15]}[x]
    assert charts.selected_steps(zoom, frame().assign(x=xs), x) == expected


@pytest.mark.parametrize("n", [(1, 1, 1, 1), (1, 5, 1, 1)], ids=["every-line", "bucketed"])
def test_a_drag_on_a_chart_reads_back_as_the_steps_it_covers(n):
    """The brush hands back its extent under the field its layer draws x with ("at" on the
    envelope of bucketed lines): a run past 2,000 lines zoomed on no drag while only "x" was
    read (stop 33)."""
    spec = charts.metric_chart(frame(n=n), "loss").to_dict()
    (zoom,) = spec["params"]
    (brushed,) = [unit for unit in layers(spec) if unit.get("name") in zoom["views"]]
    field = brushed["encoding"]["x"]["field"]
    assert charts.selected_steps({field: [1.6, 3.2]}, frame(n=n)) == (1, 4)


def test_compare_chart_colours_each_run():
    spec = charts.compare_chart({"a": frame(), "b": frame(n=(1, 4, 1, 1))}, "loss").to_dict()
    area, line, _ = layers(spec)
    assert area["mark"]["type"] == "area"  # run b was bucketed
    assert line["encoding"]["color"]["field"] == "run"
    assert line["encoding"]["detail"]["field"] == "attempt"
    assert [r["run"] for r in datasets(spec)[0]] == ["a"] * 4 + ["b"] * 4


def test_compare_draws_a_bucketed_line_through_its_extremes_as_the_run_page_does():
    """Compare drew a bucketed run's mean: the seed's spike to 13 read 7 there while its Run
    page read 13. Its line goes through each bucket's min and max, in their logged order."""
    bucketed = frame(n=(1, 5, 1, 1))
    for spec in (charts.compare_chart({"a": bucketed}, "loss").to_dict(),
                 charts.metric_chart(bucketed, "loss").to_dict()):
        line = next(u for u in layers(spec) if u["mark"]["type"] == "line")
        assert line["encoding"]["y"]["field"] == "extreme", line["encoding"]
        fold = next(t for t in line["transform"] if "fold" in t)
        assert fold["fold"] == ["lo", "hi"]
    assert max(r["hi"] for r in datasets(charts.compare_chart({"a": bucketed}, "loss")
                                         .to_dict())[0]) == 10.0


@pytest.mark.parametrize(("result", "mark", "x_type", "columns"), [
    (pd.DataFrame({"step": [1, 2, 3], "loss": [3.0, 2.0, 1.0], "acc.top1": [0.1, 0.2, 0.3]}),
     "line", "quantitative", {"loss", "acc.top1"}),
    (pd.DataFrame({"run": ["a", "b"], "count(*)": [10, 20]}), "bar", "nominal", {"count(*)"}),
    (pd.DataFrame({"loss": [3.0, 2.0, 1.0]}), "line", "quantitative", {"loss"}),
    (pd.DataFrame({"t": pd.to_datetime(["2026-01-01", "2026-01-02"]), "n": [1, 2]}),
     "line", "temporal", {"n"}),
])
def test_quick_chart_draws_numeric_columns(result, mark, x_type, columns):
    spec = charts.quick_chart(result).to_dict()
    assert spec["mark"]["type"] == mark and spec["encoding"]["x"]["type"] == x_type
    assert {r["column"] for r in datasets(spec)[0]} == columns


@pytest.mark.parametrize("result", [
    pd.DataFrame({"count_star()": [42]}),            # one row: nothing to chart
    pd.DataFrame({"run": ["a", "b"], "state": ["live", "failed"]}),
    pd.DataFrame(),
])
def test_quick_chart_none_when_nothing_to_draw(result):
    assert charts.quick_chart(result) is None


def test_png_export():
    chart = charts.metric_chart(frame(n=(1, 2, 1, 1)), "loss", smooth=0.6,
                                markers=seed_markers("step"), reference=2.0)
    assert export.png(chart).startswith(b"\x89PNG\r\n\x1a\n")


def legends(spec) -> list[str]:
    """The titles of the legends a spec draws (a colour encoding whose legend is not null)."""
    found = []
    for unit in layers(spec):
        color = unit.get("encoding", {}).get("color", {})
        if color.get("field") and color.get("legend", {}) is not None:
            found.append(color.get("title") or color["field"])
    return found


def test_stacked_panels_share_one_legend_above_the_first():
    """A legend beside a plot narrows that plot alone, so stacked panels would not line up on
    x: legends go above the plot, and only the first panel carries them."""
    two = frame().assign(attempt=[1, 1, 2, 2])
    first = charts.metric_chart(two, "loss", markers=seed_markers("step")).to_dict()
    rest = charts.metric_chart(two, "loss", markers=seed_markers("step"), legend=False)
    assert set(legends(first)) == {"attempt", "marker"}
    assert legends(rest.to_dict()) == []
    for unit in layers(first):
        legend = unit.get("encoding", {}).get("color", {}).get("legend")
        assert legend is None or legend.get("orient") == "top"


def data_names(node) -> set[str]:
    """Every dataset a spec (or part of one) draws from by name."""
    if isinstance(node, dict):
        own = {node["data"]["name"]} if isinstance(node.get("data"), dict) and \
            "name" in node["data"] else set()
        return own.union(*(data_names(v) for k, v in node.items() if k != "datasets"))
    if isinstance(node, list):
        return set().union(*(data_names(v) for v in node))
    return set()


def test_a_panel_spec_carries_its_frames_for_streamlit_and_exports_alike():
    """The page sends specs built once per run version (panels.py): each named dataset is a
    frame Streamlit turns into Arrow, equal frames share one name, and the spec exports."""
    chart = charts.metric_chart(frame(n=(1, 2, 1, 1)), "loss", smooth=0.6,
                                markers=seed_markers("step"), reference=2.0)
    spec = charts.vega_lite(chart)
    assert data_names(spec) == set(spec["datasets"])
    assert all(isinstance(d, pd.DataFrame) for d in spec["datasets"].values())
    shown = next(d for d in spec["datasets"].values() if "value" in d.columns)
    assert shown["value"].tolist() == [2.0, 1.5, 9.0, 1.2]
    assert charts.vega_lite(chart)["datasets"].keys() == spec["datasets"].keys()
    assert export.png(spec).startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("x", ["time", "elapsed", "step"])
def test_an_x_at_infinity_is_left_out_of_the_chart_and_its_domain(x):
    """A frame or domain reaching inf on x (a log's `"time": Infinity`, issue 18 finding 12)
    once made every panel's spec invalid JSON ("[-1e+21, Infinity] is not valid JSON"): the
    spec must be strict JSON, draw only the placeable rows and fit the domain to them."""
    base = 1.7e9 if x == "time" else 0.0
    xs = [base + 1, base + 2, float("inf"), base + 3] if x != "step" else [1.0, 2.0, 3.0, 4.0]
    f = frame().assign(x=xs)
    marks = pd.DataFrame({"kind": ["epoch", "checkpoint"], "detail": ["", ""],
                          "x0": [base + 2, float("-inf")], "x1": [base + 2, float("inf")],
                          "step": [2, 4], "end_step": [2, 4], "label": ["e", "c"]})
    domain = (min(xs), max(xs))
    chart = charts.metric_chart(f, "loss", x=x, markers=marks, x_domain=domain, smooth=0.5)
    spec = chart.to_dict()
    json.dumps(spec, allow_nan=False)  # raises on inf or NaN anywhere: data, domain, scale
    finite = [v for v in xs if np.isfinite(v)]
    rows = next(d for d in datasets(spec) if "value" in d[0])
    assert len(rows) == len(finite)
    scale = layers(spec)[0]["encoding"]["x"].get("scale", {})
    unit, read = (1000, ms_of) if x == "time" else (1, float)
    assert [read(v) for v in scale.get("domain", [])] in (
        [], [min(finite) * unit, max(finite) * unit])
    assert len(items(chart.properties(width=WIDTH), "symbol")) == len(finite)  # hover points
    strip = pd.DataFrame({"x0": [base + 1, float("inf")], "x1": [base + 2, float("inf")],
                          "step": [1, 2], "micro": [0, 0], "bucket": ["a", "b"],
                          "share": [1.0, 1.0]})
    json.dumps(charts.bucket_strip(strip, x=x, x_domain=domain).to_dict(), allow_nan=False)
    json.dumps(charts.compare_chart({"r": f}, "loss", x=x).to_dict(), allow_nan=False)
