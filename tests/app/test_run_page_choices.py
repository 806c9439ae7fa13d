"""The Run page a person would choose at 3 a.m. (issue 20, items 1-6).

The page checks run in headless Chromium against one real server for the module, over:
- ``seed``: samples/seed-cliff (step and elapsed axes: the spike to 13, the 155 s save);
- ``clock``: the same lines with a ``time`` field (x = time);
- ``llmc``: an llm.c ``main.log`` (another trainer: constant lr and grad norm, no clock);
- ``quiet``: a run of ours that wrote a few lines a second apart and then stopped (stalled);
- ``growing``: a run this module appends to while its page is open.

What the spec alone decides (smoothing, scales, tick formats, legends) is checked on the
chart builders' Vega-Lite, laid out by Vega itself (vl-convert). A screenshot of each page
opened is kept in $CLIFFWATCH_SCREENSHOTS, else .artifacts/screenshots/ (ignored by git).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.dashboard import charts, panels, reads, url
from app.monitor import Monitor
from app.read import series as series_mod
from app.settings import Settings
from tests.app.test_charts import drawn, items, layers, scene_nodes
from tests.app.test_dashboard_browser import artifacts  # noqa: F401 (a fixture)
from tests.app.test_foreign_runs_drawn import llmc
from tests.app.test_own_gap_metric import OWN, own_gap_log
from tests.conftest import SAMPLES, Server, wait_for

CHART = "[data-testid=stVegaLiteChart]"
T0 = 1795939200.0  # 2026-12-01 00:00 UTC: the clock run's first line
WIDTH = 1000
# a stall rule quick enough for a test: no line for 5 s (3x the typical interval)
RULES = """
[[rule]]
name = "stall"
type = "stall"
severity = "critical"
factor = 3
min = 5
"""


def seed_with_clock(folder: Path) -> None:
    """The seed's lines and events with ``time`` = T0 + elapsed_s."""
    folder.mkdir(parents=True)
    for name in ("metrics.jsonl", "events.jsonl"):
        rows = [json.loads(line) for line in (SAMPLES / "seed-cliff" / name).open()]
        (folder / name).write_text("".join(
            json.dumps({**r, "time": T0 + r["elapsed_s"]}) + "\n" for r in rows))


def lines_of_ours(first: int, last: int, *, loss: float = 0.5) -> str:
    now = time.time()
    return "".join(json.dumps({"step": s, "loss": loss, "elapsed_s": float(s),
                               "time": now - (last - s)}) + "\n"
                   for s in range(first, last + 1))


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("choices") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logdir / "seed")
    seed_with_clock(logdir / "clock")
    llmc(logdir / "llmc", 400)
    for run in ("quiet", "growing"):
        (logdir / run).mkdir()
        (logdir / run / "metrics.jsonl").write_text(lines_of_ours(1, 20))
    own_gap_log(logdir / "owngap")
    return logdir


@pytest.fixture(scope="module")
def served(logs):
    rules = logs.parent / "rules.toml"
    rules.write_text(RULES)
    server = Server(logs, "--rules", str(rules))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(browser, served, artifacts, request):  # noqa: F811
    page = browser.new_page(viewport={"width": 1400, "height": 2600})
    yield page
    page.screenshot(path=str(artifacts / f"{request.node.name}.png"), full_page=True)
    page.close()


def chart(page, title: str):
    return page.locator(CHART).filter(has=page.locator("svg text", has_text=re.compile(
        rf"^{re.escape(title)}$"))).first


def axis_labels(drawn_chart, axis: str) -> list[str]:
    """The tick labels Vega drew on one axis ("X" or "Y") of a chart on the page."""
    group = drawn_chart.locator(f"[aria-label^='{axis}-axis']").first
    group.wait_for(state="attached", timeout=30_000)
    return [t for t in group.locator("text").all_text_contents() if t and t.strip()]


@pytest.fixture(scope="module")
def seed_frame(tmp_path_factory) -> pd.DataFrame:
    """The seed's loss and queue depth as the Run page reads them (1,000 buckets)."""
    logdir = tmp_path_factory.mktemp("seedread") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logdir / "seed")
    with Monitor.open(logdir, Settings()) as monitor:
        monitor.tailer.catch_up()
        return series_mod.series(monitor.db.cursor(), "seed", ["loss", "hs_queue_depth"],
                                 points=reads.POINTS).frame


# -- 1. x = time --------------------------------------------------------------------------------

def test_time_axis_draws_the_lines_with_24_hour_labels(page, served):
    page.goto(f"{served.url}/run?run=clock&x=time&metrics=loss")
    loss = chart(page, "loss")
    loss.wait_for(timeout=30_000)
    labels = [t for t in axis_labels(loss, "X") if t != "time"]  # less the axis title
    assert labels and not [t for t in labels if re.search(r"AM|PM", t)], labels
    # the seed's clock runs 00:00 to 06:15 UTC; the browser's zone is the machine's
    assert [t for t in labels if not re.fullmatch(r"\d\d:\d\d", t)] == [], labels
    # the line is drawn across the plot, not a vertical line at its left edge
    line = loss.locator("[aria-roledescription='line mark']").first
    line.wait_for(state="attached", timeout=10_000)
    plot = loss.bounding_box()
    assert line.bounding_box()["width"] > 0.6 * plot["width"]


@pytest.mark.parametrize("present", [[0, 2, 3, 5], [1, 5], [5]])
def test_a_bucket_keeps_its_colour_whatever_else_is_drawn(present):
    """The colour is the bucket id's: the same on every axis and page (issue 20: 1/4/5 in
    reds on x = time, pale blues with x = elapsed)."""
    cells = pd.DataFrame({"x0": np.arange(len(present), dtype=float),
                          "x1": np.arange(1, len(present) + 1, dtype=float),
                          "step": range(len(present)), "micro": 0, "bucket": present,
                          "share": 1.0})
    for x in ("step", "elapsed"):
        chart_ = charts.bucket_strip(cells, x=x).properties(width=200)
        fills = {i["description"].split("bucket: ")[1].split(";")[0]: i["fill"]
                 for i in items(chart_, "rect")}
        assert fills == {str(b): charts.BUCKET_COLORS[b] for b in present}


# -- 2. smoothing ---------------------------------------------------------------------------------

def test_the_page_opens_unsmoothed_and_smooths_only_loss_like_panels():
    assert url.DEFAULT_SMOOTH == 0
    assert url.parse_run_view({"run": "r"}).smooth == 0
    for metric in ("loss", "val_loss", "train/loss", "accuracy", "eval_acc", "perplexity"):
        assert panels.smoothed(metric), metric
    for metric in ("gap_s", "gap_steps", "hs_queue_depth", "lr", "learning_rate",
                   panels.STRIP, "tok_per_sec"):
        assert not panels.smoothed(metric), metric


def strong_top(chart_) -> float:
    """The highest pixel (smallest y) the fully opaque lines reach."""
    tops = []
    for kind, group in drawn(chart_):
        if kind != "line":
            continue
        for item in group:
            if item.get("opacity", 1) == 1 and item.get("strokeOpacity", 1) == 1:
                tops.append(item["y"])
    return min(tops)


def test_the_seed_spike_to_13_reads_13_in_the_strong_line(seed_frame):
    """As the page draws it by default (its smoothing, 1,000 buckets), the opaque line
    reaches the spike's top, where the min/max band ends (not ~2.5: the EMA of the means)."""
    smooth = url.DEFAULT_SMOOTH if panels.smoothed("loss") else 0
    loss = charts.metric_chart(seed_frame, "loss", smooth=smooth).properties(width=WIDTH,
                                                                             height=300)
    band_top = min(i["y2"] for i in items(loss, "area"))  # y2: the band's hi
    assert strong_top(loss) == pytest.approx(band_top, abs=1.5)
    # asked for, the EMA is drawn as a thin trend and the logged line stays the strong one
    smoothed = charts.metric_chart(seed_frame, "loss", smooth=0.6).properties(width=WIDTH,
                                                                              height=300)
    assert strong_top(smoothed) == pytest.approx(band_top, abs=1.5)


def test_a_queue_drop_to_0_reads_0(seed_frame):
    queue = charts.metric_chart(seed_frame, "hs_queue_depth",
                                smooth=0.6 if panels.smoothed("hs_queue_depth") else 0,
                                from_zero=panels.from_zero("hs_queue_depth"))
    spec = charts.vega_lite(queue)
    lines = [u for u in layers(spec) if u["mark"]["type"] == "line"]
    assert all(u["encoding"]["y"]["field"] != "smooth" for u in lines)
    assert all(u["encoding"]["y"]["scale"].get("zero") for u in lines)


# -- 3. checkpoints and the legend ----------------------------------------------------------------

def test_a_blocking_checkpoint_spans_the_steps_it_cost(page, served):
    """The seed's save at step 2000 blocked 155 s; its next line is at step 2027."""
    page.goto(f"{served.url}/run?run=seed&metrics=loss&from=1950&to=2100")
    loss = chart(page, "loss")
    loss.wait_for(timeout=30_000)
    save = loss.locator("[aria-label*='checkpoint ckpt/step-2000']").first
    save.wait_for(state="attached", timeout=30_000)
    plot = loss.locator("[aria-label^='X-axis']").first.bounding_box()
    # 27 of the 150 steps shown: about 18% of the plot's width
    assert save.bounding_box()["width"] == pytest.approx(plot["width"] * 27 / 150, rel=0.2)


def test_the_legend_shows_rules_as_dashed_strokes_and_a_one_step_stall_is_seen():
    marks = pd.DataFrame({
        "kind": ["checkpoint", "epoch", "incident", "alert"], "detail": ["", "", "stall",
                                                                        "stall: firing"],
        "x0": [2000.0, 2114.0, 2027.0, 2027.0], "x1": [2000.0, 2114.0, 2027.0, 2027.0],
        "label": ["checkpoint", "epoch 1", "stall in gap_s", "alert"]})
    chart_ = charts.markers_layer(marks, x_domain=(0, 4500)).properties(width=WIDTH)
    spec = chart_.to_dict()
    legends = {tuple(u["encoding"]["color"]["scale"]["domain"]): u["encoding"]["color"]["legend"]
               for u in layers(spec) if u["encoding"]["color"].get("legend")}
    rules = legends[("epoch", "alert")]
    assert rules["symbolType"] == "stroke" and rules["symbolDash"]
    assert legends[("checkpoint", "stall")]["symbolType"] == "square"
    # each span listed is drawn at least NARROW_PX wide, however short it is
    wide = {i["stroke"] for i in items(chart_, "rule") if i["strokeWidth"] >= charts.NARROW_PX}
    assert wide == {charts.MARKER_COLORS["checkpoint"], charts.MARKER_COLORS["stall"]}


# -- 4. a stalled run says so at the top -----------------------------------------------------------

def test_a_stalled_run_says_so_at_the_top(page, served):
    page.goto(f"{served.url}/run?run=quiet")
    banner = page.locator("[data-testid=stAlert]").filter(has_text="Stalled").first
    banner.wait_for(timeout=40_000)
    text = banner.inner_text()
    assert re.search(r"no line for [\d,]+ s, since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text), text
    assert "step 20, loss 0.5" in text, text
    title = page.locator("h1").first.bounding_box()
    first_chart = chart(page, "loss")
    first_chart.wait_for(timeout=30_000)
    assert title["y"] < banner.bounding_box()["y"] < first_chart.bounding_box()["y"]


# -- 5. ticks to the data's precision --------------------------------------------------------------

def test_a_constant_series_of_another_trainer_is_labelled_as_logged(page, served):
    page.goto(f"{served.url}/run?run=llmc&metrics=grad_norm,gap_steps")
    for title in ("grad_norm", "gap_steps"):
        labels = axis_labels(chart(page, title), "Y")
        assert labels and not [t for t in labels if re.search(r"\.\d*0{3,}|\d{6,}", t)], labels


def test_a_metric_of_the_runs_own_named_gap_s_is_charted_beside_the_derived_gap(page, served):
    """issue 22, item 4: the log's own gap_s (150 on every line) is its own chart, and the
    derived gap between lines (1 s) is "gap_s (derived)"; neither hides the other."""
    page.goto(f"{served.url}/run?run=owngap")
    mine, derived = chart(page, "gap_s"), chart(page, "gap_s (derived)")
    tops = [max(float(t.replace(",", "")) for t in axis_labels(c, "Y")) for c in (mine, derived)]
    assert tops[0] >= OWN > 10 > tops[1] >= 1, tops


@pytest.mark.parametrize("values", [[0.05, 0.049999999995, 0.050000000005]])
def test_ticks_are_formatted_to_the_data_precision(values):
    """Float noise round 0.05 (a 2M-line run's gap) is labelled 0.05, not 0.049999999995; a
    constant series in the browser: test_a_constant_series_of_another_trainer_..."""
    frame = pd.DataFrame({"metric": "m", "attempt": 1, "x": [1.0, 2.0, 3.0],
                          "step": [1, 2, 3], "value": values, "lo": values, "hi": values,
                          "lo_step": [1, 2, 3], "hi_step": [1, 2, 3], "n": 1, "nonfinite": 0})
    chart_ = charts.metric_chart(frame, "m").properties(width=400)
    scene = [t for t in texts(chart_) if re.fullmatch(r"[\d.,-]+", t)]
    assert scene and all(len(t.replace(",", "")) <= 6 for t in scene), scene


def texts(chart_) -> list[str]:
    """Every text Vega draws for the chart (tick labels among them)."""
    return [node["text"] for node in scene_nodes(chart_) if isinstance(node.get("text"), str)]


def test_a_millisecond_of_gap_jitter_stays_small():
    values = [1.0, 1.001, 1.0005, 1.0, 1.001]
    frame = pd.DataFrame({"metric": "gap_s", "attempt": 1, "x": np.arange(5.0),
                          "step": range(5), "value": values, "lo": values, "hi": values,
                          "lo_step": range(5), "hi_step": range(5), "n": 1, "nonfinite": 0})
    chart_ = charts.metric_chart(frame, "gap_s", from_zero=panels.from_zero("gap_s")
                                 ).properties(width=400, height=200)
    ys = [p["y"] for p in items(chart_, "line")]
    assert max(ys) - min(ys) < 0.05 * 200


# -- 6. the zoom placeholders follow a live run ---------------------------------------------------

def test_the_range_placeholders_follow_a_live_run(page, served, logs):
    page.goto(f"{served.url}/run?run=growing")
    # by its placeholder: while a rerun draws the new box, Streamlit keeps the old one (stale)
    # on the page, so for a moment there are two "to step" boxes
    def to_step(placeholder: str):
        return page.locator(f"input[aria-label='to step'][placeholder='{placeholder}']")

    to_step("20").wait_for(timeout=30_000)
    with (logs / "growing" / "metrics.jsonl").open("a") as handle:
        handle.write(lines_of_ours(21, 60))
    to_step("60").wait_for(timeout=30_000)
    wait_for(lambda: page.get_by_label("to step").count() == 1, timeout=30)  # the old one goes
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
