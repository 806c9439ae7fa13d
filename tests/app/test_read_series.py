"""Chart series (app/read/series.py) on real DuckDB files filled by real ingest of real JSONL."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from app import settings as settings_mod
from app import tiler
from app.monitor import Monitor
from app.read import series as S
from samples.long_run import SPIKE_STEP, STALL_STEP, write_run

METRICS = ["loss", "accuracy", "hs_queue_depth", "tok_per_sec", "lr"]


def open_monitor(logdir: Path) -> Monitor:
    monitor = Monitor.open(logdir, dataclasses.replace(settings_mod.resolve()))
    monitor.tailer.catch_up()
    return monitor


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    logs = tmp_path_factory.mktemp("million") / "logs"
    write_run(logs / "big" / "metrics.jsonl", 1_000_000)
    monitor = open_monitor(logs)
    tiler.roll(monitor.db)
    yield monitor
    monitor.close()


def test_million_line_run_is_bounded_and_keeps_its_maximum(million):
    cursor = million.db.cursor()
    run = S.series(cursor, "big", METRICS, points=1000)
    assert run.lines == 1_000_000 and not run.full
    assert run.frame.groupby("metric").size().max() <= 2000
    assert set(run.frame["metric"]) == set(METRICS)
    loss = run.frame[run.frame["metric"] == "loss"]
    top = loss.loc[loss["hi"].idxmax()]
    assert (top["hi"], top["hi_step"]) == (42.5, SPIKE_STEP)
    assert loss["n"].sum() == 1_000_000
    gaps = S.gaps(cursor, "big")
    stall = gaps.frame[gaps.frame["metric"] == "gap_s"]
    assert stall["hi"].max() == pytest.approx(167.7) and stall.loc[stall["hi"].idxmax(),
                                                                    "hi_step"] == STALL_STEP
    assert S.typical_gap(cursor, "big") == pytest.approx(0.5)
    assert S.step_span(cursor, "big") == (1, 1_000_000)
    assert S.axes(cursor, "big") == ["step", "elapsed"]
    assert S.metric_names(cursor, "big") == ["loss", "accuracy", "lr", "tok_per_sec",
                                             "hs_queue_depth"]


def test_zoom_is_full_resolution(million):
    cursor = million.db.cursor()
    zoom = S.series(cursor, "big", ["loss"], lo=SPIKE_STEP - 300, hi=SPIKE_STEP + 299,
                    points=1000)
    assert zoom.full and zoom.lines == 600 and len(zoom.frame) == 600
    assert zoom.frame["step"].tolist() == list(range(SPIKE_STEP - 300, SPIKE_STEP + 300))
    assert zoom.frame["value"].max() == 42.5
    wide = S.series(cursor, "big", ["loss"], lo=400_000, hi=700_000, x="elapsed")
    assert wide.lines == 300_001 and not wide.full and len(wide.frame) <= 1000
    assert wide.frame["hi"].max() == 42.5 and wide.frame["n"].sum() == 300_001
    assert wide.frame["x"].min() == pytest.approx(399_999 * 0.5)


def test_tiles_equal_raw_buckets(million):
    """The same 300,000-line range, once from tiles (> RAW_LINES) and once from raw lines:
    bucket for bucket the same lines, min, max and sum."""
    cursor = million.db.cursor()
    lo = 512 * 391 + 1  # a tile edge: buckets of whole tiles either way
    hi = lo - 1 + 512 * 600
    tiled = S.series(cursor, "big", ["hs_queue_depth", "loss"], lo=lo, hi=hi, points=300)
    raw = S.series(cursor, "big", ["hs_queue_depth", "loss"], lo=lo, hi=hi, points=300,
                   raw_lines=10**9)
    for column in ("x", "step", "n", "nonfinite", "lo", "hi"):
        np.testing.assert_array_equal(tiled.frame[column], raw.frame[column], err_msg=column)
    np.testing.assert_allclose(tiled.frame["value"], raw.frame["value"], rtol=1e-12)
    depth = tiled.frame[tiled.frame["metric"] == "hs_queue_depth"]
    assert (depth["value"] * depth["n"]).round().tolist() == (
        raw.frame[raw.frame["metric"] == "hs_queue_depth"]["value"] * depth["n"]).round().tolist()


def test_lines_after_tiling_appear(tmp_path):
    logs = tmp_path / "logs"
    path = logs / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 1201)))
    monitor = open_monitor(logs)
    try:
        assert tiler.roll(monitor.db) == 1024
        with path.open("a") as f:
            f.write("".join(json.dumps({"step": s, "loss": 9.0}) + "\n" for s in (1201, 1202)))
        monitor.tailer.catch_up()
        cursor = monitor.db.cursor()
        run = S.series(cursor, "r", ["loss"], points=100)
        assert run.lines == 1202 and run.frame["n"].sum() == 1202
        assert run.frame["hi"].max() == 9.0
        assert S.step_span(cursor, "r") == (1, 1202)
    finally:
        monitor.close()


def test_resumed_attempts_each_have_their_line(tmp_path):
    logs = tmp_path / "logs"
    steps = [*range(1, 3001), *range(2000, 4001)]
    path = logs / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"step": s, "loss": 1 / s, "elapsed_s": i * 1.0}) + "\n"
                            for i, s in enumerate(steps)))
    monitor = open_monitor(logs)
    try:
        tiler.roll(monitor.db)
        cursor = monitor.db.cursor()
        for points in (100, 10_000):
            run = S.series(cursor, "r", ["loss"], points=min(points, 2000))
            assert set(run.frame["attempt"]) == {1, 2} and run.lines == len(steps)
            assert len(run.frame) <= 100 + 2 or points > 100
        gaps = S.gaps(cursor, "r", points=2000).frame
        steps_gap = gaps[gaps["metric"] == "gap_steps"]
        assert steps_gap["lo"].min() == 1 and steps_gap["hi"].max() == 1  # none across attempts
        zoom = S.series(cursor, "r", ["loss"], lo=2500, hi=2600)
        assert zoom.full and zoom.lines == 202
        assert zoom.frame.groupby("attempt").size().to_dict() == {1: 101, 2: 101}
    finally:
        monitor.close()


def test_nonfinite_counted_never_in_lo_hi(tmp_path):
    logs = tmp_path / "logs"
    path = logs / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    values = ["NaN" if s % 97 == 0 else "Infinity" if s % 89 == 0 else str(s % 7) for s in
              range(1, 3001)]
    path.write_text("".join(f'{{"step": {s}, "loss": {v}}}\n' for s, v in
                            zip(range(1, 3001), values, strict=True)))
    monitor = open_monitor(logs)
    try:
        tiler.roll(monitor.db)
        frame = S.series(monitor.db.cursor(), "r", ["loss"], points=50).frame
        bad = sum(v in ("NaN", "Infinity") for v in values)
        assert frame["nonfinite"].sum() == bad and frame["n"].sum() == 3000
        assert frame["hi"].max() == 6 and frame["lo"].min() == 0
        assert np.isfinite(frame["value"]).all()
    finally:
        monitor.close()


def test_tiles_with_edges_and_a_resumed_tail_agree_with_raw(tmp_path):
    """A range cutting tiles in the middle, on a run whose unrolled tail holds the end of one
    attempt and a resumed one: read from tiles + raw edges + tail (raw_lines=100) and from raw
    lines only, every line counts once, and the extremes, their steps and the sums agree."""
    logs = tmp_path / "logs"
    steps = [*range(1, 5801), *range(5000, 5200)]  # 6,000 lines; attempt 2 resumes at 5000
    path = logs / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"step": s, "loss": (s * 37 % 101) / 8 + (s == 5123) * 9,
                                        "elapsed_s": i * 0.5 + (i >= 5900) * 30}) + "\n"
                            for i, s in enumerate(steps)))
    monitor = open_monitor(logs)
    try:
        assert tiler.roll(monitor.db) == 5632  # 368 lines (both attempts) stay in the tail
        cursor = monitor.db.cursor()
        for read in (S.series, S.gaps):
            args = (["loss"],) if read is S.series else ()
            tiled = read(cursor, "r", *args, lo=2100, hi=5700, points=40, raw_lines=100)
            raw = read(cursor, "r", *args, lo=2100, hi=5700, points=40, raw_lines=10**9)
            assert tiled.lines == raw.lines == 3601 + 200 and not tiled.full
            for frame in (tiled.frame, raw.frame):
                assert len(frame) <= 2 * (40 + 2)
            for (metric, attempt), t in tiled.frame.groupby(["metric", "attempt"]):
                r = raw.frame[(raw.frame["metric"] == metric) & (raw.frame["attempt"] == attempt)]
                # attempt 2's first line has no gap: nothing before it in its attempt
                first = 0 if metric == "loss" else 1
                assert t["n"].sum() == r["n"].sum() == (3601 if attempt == 1 else 200 - first)
                top, bottom = t.loc[t["hi"].idxmax()], t.loc[t["lo"].idxmin()]
                assert (top["hi"], top["hi_step"]) == (r["hi"].max(), r.loc[r["hi"].idxmax(),
                                                                             "hi_step"])
                assert bottom["lo"] == r["lo"].min()
                assert (t["value"] * t["n"]).sum() == pytest.approx((r["value"] * r["n"]).sum())
        gaps = S.gaps(cursor, "r", lo=2100, hi=5700, points=40, raw_lines=100).frame
        assert gaps[gaps["metric"] == "gap_s"]["hi"].max() == 30.5  # the tail's stall
        assert S.step_span(cursor, "r") == (1, 5800)
        assert S.metric_names(cursor, "r") == ["loss"] and S.axes(cursor, "r") == ["step",
                                                                                   "elapsed"]
    finally:
        monitor.close()


def test_series_with_gaps_in_one_read_equals_the_two_reads(tmp_path):
    """series(..., gaps=True) is series() and gaps() in one read (the Run page's round trips):
    the same rows whether the range is read from tiles with edges and a resumed tail, from
    raw lines, or one row per line, on each axis; and names_and_axes() is the two reads."""
    import pandas as pd

    logs = tmp_path / "logs"
    steps = [*range(1, 3801), *range(3000, 3200)]  # attempt 2 resumes at 3000, in the tail
    path = logs / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    # values without ties: a tie's step (lo_step, hi_step) is any of the tied ones
    path.write_text("".join(json.dumps({"step": s, "loss": (s * 37 % 101) / 8 + s / 1e6,
                                        "accuracy": s * 13 % 97 + s / 1e6,
                                        "elapsed_s": i * 0.5 + i * i / 1e8 + (i >= 3900) * 30})
                            + "\n"
                            for i, s in enumerate(steps)))
    monitor = open_monitor(logs)
    try:
        tiler.roll(monitor.db)
        cursor = monitor.db.cursor()
        reads = [dict(lo=1100, hi=3700, points=40, raw_lines=100),  # tiles, edges and tail
                 dict(lo=1100, hi=3700, points=40, raw_lines=10**9, x="elapsed"),  # raw
                 dict(lo=3100, hi=3300, points=1000)]  # one row per line
        for where in reads:
            both = S.series(cursor, "r", ["loss", "accuracy"], gaps=True, **where)
            apart = [S.series(cursor, "r", ["loss", "accuracy"], **where),
                     S.gaps(cursor, "r", **where)]
            want = pd.concat([a.frame for a in apart]).sort_values(
                ["metric", "attempt", "x"], ignore_index=True)
            # steps between lines are all 1 but at the resume: where those tie is arbitrary
            ties = (want["metric"] == "gap_steps").to_numpy()
            for frame in (both.frame, want):
                frame.loc[ties, ["lo_step", "hi_step"]] = pd.NA
            pd.testing.assert_frame_equal(both.frame, want)
            assert (both.lines, both.full) == (apart[0].lines, apart[0].full)
            assert set(both.frame["metric"]) == {"loss", "accuracy", "gap_s", "gap_steps"}
        assert S.names_and_axes(cursor, "r") == (S.metric_names(cursor, "r"),
                                                 S.axes(cursor, "r")) == (
            ["loss", "accuracy"], ["step", "elapsed"])
    finally:
        monitor.close()


def test_an_x_at_infinity_is_left_out_of_every_axis(tmp_path):
    """`"time": Infinity` (and -Infinity, NaN, an elapsed_s at Infinity) in a log is no place
    on an axis (issue 18, finding 12): such a line is left out on that x, from tiles, raw
    buckets and one row per line alike, and every x read stays finite; on x=step it counts."""
    logs = tmp_path / "logs"
    path = logs / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    odd_time = {700: "Infinity", 701: "-Infinity", 702: "NaN", 1500: "Infinity"}
    odd_elapsed = {703: "Infinity", 1501: "-Infinity"}
    path.write_text("".join(
        f'{{"step": {s}, "loss": {1 / s}, "time": {odd_time.get(s, 1.7e9 + s)}, '
        f'"elapsed_s": {odd_elapsed.get(s, float(s))}}}\n' for s in range(1, 2001)))
    monitor = open_monitor(logs)
    try:
        assert tiler.roll(monitor.db) == 1536  # the first 1,500 lines' tiles hold odd x too
        cursor = monitor.db.cursor()
        left_out = {"time": len(odd_time), "elapsed": len(odd_elapsed), "step": 0}
        for x, missing in left_out.items():
            for points, raw_lines in ((2000, 10**9), (50, 10**9), (50, 100)):
                for read in (S.series(cursor, "r", ["loss"], x=x, points=points,
                                      raw_lines=raw_lines),
                             S.gaps(cursor, "r", x=x, points=points, raw_lines=raw_lines)):
                    where = f"x={x} points={points} raw_lines={raw_lines}"
                    assert np.isfinite(read.frame["x"]).all(), where
                    if raw_lines > 2000:  # tiles count a tile's lines where it starts
                        assert read.lines == 2000 - missing, where
                    frame = read.frame[read.frame["metric"] == "loss"]
                    if len(frame):
                        assert frame["n"].sum() == read.lines, where
    finally:
        monitor.close()
