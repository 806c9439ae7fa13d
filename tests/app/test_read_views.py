"""The dashboard's and the API's shared reads (app/read) on real DuckDB files fed by the real
tailer: markers at the seed's event steps, checkpoint spans as wide as their events, one strip
cell per micro-batch (and a bounded strip when merged), run states from what the logs say,
alert states from a rule that really fired, and incident zoom links."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from app import settings as settings_mod
from app.alerts.engine import Engine
from app.alerts.rules import Rule, default_rules
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis
from app.monitor import Monitor
from app.read.incidents import incidents_table
from app.read.markers import markers
from app.read.runs import runs_table
from app.read.strip import bucket_strip
from tests.app.test_alert_engine import replica_of_seed
from tests.conftest import SAMPLES

SETTINGS = settings_mod.resolve()


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("read") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff")
    monitor = Monitor.open(logs, SETTINGS)
    monitor.tailer.catch_up()
    LiveDiagnosis(monitor.db, Watch()).update()
    yield monitor.db.cursor()
    monitor.close()


def seed_events() -> list[dict]:
    lines = (SAMPLES / "seed-cliff" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def write(logs, run: str, rows: list[dict], file: str = "metrics.jsonl", mtime=None) -> None:
    (logs / run).mkdir(parents=True, exist_ok=True)
    path = logs / run / file
    with path.open("a") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_markers_land_at_the_seed_events_with_checkpoints_as_wide_as_theirs(seed):
    events = seed_events()
    starts = [e for e in events if e["event"] == "checkpoint_start"]
    ends = [e for e in events if e["event"] == "checkpoint_end"]
    by_step = markers(seed, "seed-cliff")
    by_time = markers(seed, "seed-cliff", x="elapsed")
    saves = by_step[by_step["kind"] == "checkpoint"]
    assert list(zip(saves["x0"], saves["x1"], strict=True)) == [
        (s["step"], e["step"]) for s, e in zip(starts, ends, strict=True)]
    spans = by_time[by_time["kind"] == "checkpoint"]
    assert list(spans["x1"] - spans["x0"]) == pytest.approx(
        [e["elapsed_s"] - s["elapsed_s"] for s, e in zip(starts, ends, strict=True)])
    assert list(spans["x0"]) == [s["elapsed_s"] for s in starts]
    assert "blocked 155.2 s" in spans["label"].iat[0]
    epochs = by_step[by_step["kind"] == "epoch"]
    assert list(epochs["x0"]) == [e["step"] for e in events if e["event"] == "epoch_start"]
    assert list(by_time[by_time["kind"] == "epoch"]["x0"]) == [
        e["elapsed_s"] for e in events if e["event"] == "epoch_start"]
    found = by_step[by_step["kind"] == "incident"]
    assert list(zip(found["detail"], found["x0"], found["x1"], strict=True)) == [
        ("stall", 2027, 2027), ("spike", 2029, 2035), ("stall", 4019, 4019),
        ("spike", 4021, 4025), ("cliff", 4231, 4499)]
    assert "blocked the training loop for 155.2 s" in found["label"].iat[1]
    # incidents carry no elapsed time of their own: it is the logged line's at their step
    spike = by_time[(by_time["kind"] == "incident") & (by_time["step"] == 2029)]
    assert (spike["x0"].iat[0], spike["x1"].iat[0]) == pytest.approx((10181.2, 10211.2))
    inside = markers(seed, "seed-cliff", lo=2030, hi=4100)
    assert list(zip(inside["kind"], inside["step"], strict=True)) == [
        ("incident", 2029), ("epoch", 2114), ("checkpoint", 4001), ("incident", 4019),
        ("incident", 4021)]


def test_incident_marker_names_its_worst_point(tmp_path):
    """Issue 10: a spike that starts at 2027 and peaks at 2029 spans its episode, and its
    tooltip names the peak where it was logged."""
    replica_of_seed(tmp_path)
    monitor = Monitor.open(tmp_path, SETTINGS)
    try:
        monitor.tailer.catch_up()
        LiveDiagnosis(monitor.db, Watch()).update()
        found = markers(monitor.db.cursor(), "seed", lo=2027, hi=2027, x="elapsed")
    finally:
        monitor.close()
    spike = found[(found["kind"] == "incident") & (found["detail"] == "spike")].iloc[0]
    assert (spike["step"], spike["end_step"]) == (2027, 2035)
    assert (spike["x0"], spike["x1"]) == pytest.approx((10171.2, 10211.2))
    assert spike["label"].startswith(
        "spike in loss at step 2027: peak 13 at step 2029 (typical ")
    assert ", through step 2035" in spike["label"]
    stall = found[(found["kind"] == "incident") & (found["detail"] == "stall")].iloc[0]
    assert " at step 2027: " in stall["label"] and "peak" not in stall["label"]


def test_bucket_strip_has_one_cell_per_micro_batch_and_merging_is_bounded(seed):
    rows = [json.loads(line) for line in
            (SAMPLES / "seed-cliff" / "metrics.jsonl").read_text().splitlines()]
    cells = bucket_strip(seed, "seed-cliff", max_cells=100_000)
    assert len(cells) == sum(len(r["buckets"]) for r in rows if "buckets" in r)
    line = cells[cells["step"] == 2027]  # 27 steps after 2000: its buckets split 2000..2027
    assert list(line["bucket"]) == next(r["buckets"] for r in rows if r["step"] == 2027)
    assert (line["x0"].min(), line["x1"].max()) == (2000, 2027)
    assert line["x1"].iat[0] - line["x0"].iat[0] == pytest.approx(27 / len(line))
    zoom = bucket_strip(seed, "seed-cliff", lo=2027, hi=2027, x="elapsed")
    assert (zoom["x0"].min(), zoom["x1"].max()) == pytest.approx((10004.0, 10171.2))
    merged = bucket_strip(seed, "seed-cliff", max_cells=200)
    assert 100 < len(merged) <= 200
    assert merged["share"].between(0, 1, inclusive="right").all()
    assert (merged["x0"].diff().dropna() > 0).all()


def test_runs_table_states_from_the_logs_and_the_stall_rule(tmp_path):
    logs, now = tmp_path / "logs", time.time()
    lines = [{"step": s, "loss": 1.0 / s, "accuracy": s / 100, "elapsed_s": s * 2.0}
             for s in range(1, 41)]
    for run in ("done", "crashed", "stopped-by-hand", "quiet", "busy"):
        write(logs, run, lines, mtime=now - (3600 if run == "quiet" else 1))
    write(logs, "done", [{"event": "run_end", "step": 40, "status": "completed"}], "events.jsonl")
    write(logs, "crashed", [{"event": "run_end", "step": 40, "status": "failed"}],
          "events.jsonl")
    write(logs, "stopped-by-hand", [{"event": "run_end", "step": 40, "status": "interrupted",
                                     "reason": "sigterm"}], "events.jsonl")  # Ctrl-C: no crash
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        table = runs_table(monitor.db.cursor(), now=now)
        state = dict(zip(table["run"], table["state"], strict=True))
        assert state == {"done": "finished", "crashed": "failed", "quiet": "stalled",
                         "stopped-by-hand": "interrupted", "busy": "live"}
        assert table["run"].iat[0] == "busy"  # live first
        busy = table[table["run"] == "busy"].iloc[0]
        assert (busy["last_step"], busy["lines"], busy["last_loss"]) == (40, 40, 1 / 40)
        assert busy["lines_per_min"] == pytest.approx(30.0)  # a line every 2 s
        assert busy["since_last_s"] == pytest.approx(1, abs=0.1)
        # the stall rule in force decides: an hour's silence is within a 2 h minimum
        patient = [Rule(name="stall", type="stall", min_s=7200.0)]
        again = runs_table(monitor.db.cursor(), now=now, rules=patient)
        assert dict(zip(again["run"], again["state"], strict=True))["quiet"] == "live"
        assert list(runs_table(monitor.db.cursor(), now=now, search="CRASH")["run"]) == [
            "crashed"]
        assert len(runs_table(monitor.db.cursor(), now=now, limit=2)) == 2


def test_alert_firing_shows_in_runs_table_and_as_a_marker(tmp_path):
    logs = tmp_path / "logs"
    rule = Rule(name="loss-high", type="threshold", metric="loss", op=">", value=5.0,
                for_lines=3)
    rows = [{"step": s, "loss": 9.0 if s >= 10 else 1.0, "elapsed_s": float(s)}
            for s in range(1, 21)]
    write(logs, "hot", rows)
    write(logs, "cold", [{"step": s, "loss": 1.0} for s in range(1, 21)])
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        Engine(monitor.db, [rule, *default_rules()], ["log"]).evaluate(time.time())
        cursor = monitor.db.cursor()
        table = runs_table(cursor)
        assert dict(zip(table["run"], table["alert_state"], strict=True)) == {
            "hot": "firing", "cold": "ok"}
        fired = markers(cursor, "hot", x="elapsed")
        fired = fired[fired["kind"] == "alert"]
        assert list(zip(fired["step"], fired["x0"], fired["detail"], strict=True)) == [
            (12, 12.0, "loss-high: firing")]
        assert "loss-high fired on loss at step 12: 9" in fired["label"].iat[0]
        cursor.execute("INSERT INTO silences (rule, run, created_time, until_time) "
                       "VALUES ('loss-*', 'h*', 0, $1)", [time.time() + 600])
        table = runs_table(cursor)
        assert dict(zip(table["run"], table["alert_state"], strict=True)) == {
            "hot": "silenced", "cold": "ok"}


def test_resume_and_an_open_checkpoint_are_marked(tmp_path):
    logs = tmp_path / "logs"
    first = [{"step": s, "loss": 1.0, "elapsed_s": float(s)} for s in range(1, 11)]
    again = [{"step": s, "loss": 1.0, "elapsed_s": float(s)} for s in range(6, 16)]
    write(logs, "r", first + again)
    write(logs, "r", [{"event": "checkpoint_start", "step": 12, "elapsed_s": 12.5,
                       "path": "ckpt/12"}], "events.jsonl")
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        found = markers(monitor.db.cursor(), "r", x="elapsed")
        resume = found[found["kind"] == "resume"].iloc[0]
        assert (resume["step"], resume["x0"]) == (6, 6.0)
        assert "attempt 2 starts at step 6" in resume["label"]
        save = found[found["kind"] == "checkpoint"].iloc[0]
        assert (save["x0"], save["x1"], save["end_step"]) == (12.5, 15.0, 15)
        assert "not finished" in save["label"]


def test_incident_links_pad_the_incident(seed):
    table = incidents_table(seed, "seed-cliff")
    assert len(table) == 5 and (table["from_step"] < table["step"]).all()
    assert (table["to_step"] > table["end_step"]).all()
    stall = table[table["step"] == 2027].iloc[0]
    assert stall["from_step"] <= 2000  # the line before the stall is in view
    cliff = table[table["kind"] == "cliff"].iloc[0]
    assert cliff["to_step"] - cliff["end_step"] >= (4499 - 4231) // 2
    assert list(incidents_table(seed, kinds=["cliff"])["step"]) == [4231]
    assert "epoch 2 began at step 4228" in cliff["evidence"]


def unbounded_runs(cursor) -> dict:
    """The Runs table's newest values and pace over every line, as H3's first query did."""
    rows = cursor.execute("""
        WITH l AS (SELECT run, line_id, attempt, step, coalesce(elapsed_s, "time") AS t,
                          loss, accuracy FROM metrics_all),
        a AS (SELECT run, count(*) AS lines, arg_max(step, line_id) AS last_step,
                     arg_max(attempt, line_id) AS att,
                     arg_max(loss, line_id) FILTER (WHERE loss IS NOT NULL) AS loss,
                     arg_max(accuracy, line_id) FILTER (WHERE accuracy IS NOT NULL) AS acc
              FROM l GROUP BY run),
        e AS (SELECT l.run, max(t) AS end_t FROM l JOIN a ON a.run = l.run AND a.att = l.attempt
              GROUP BY l.run),
        p AS (SELECT l.run, count(*) AS n, max(t) - min(t) AS span FROM l
              JOIN a ON a.run = l.run AND a.att = l.attempt JOIN e ON e.run = l.run
              WHERE l.t >= e.end_t - 300 GROUP BY l.run)
        SELECT a.run, a.lines, a.last_step, a.loss, a.acc, 60.0 * (p.n - 1) / p.span
        FROM a JOIN p USING (run)""").fetchall()
    return {r[0]: r[1:] for r in rows}


def test_runs_table_reads_a_bounded_tail_with_the_same_answers(tmp_path):
    from app.read import runs as runs_mod
    logs = tmp_path / "logs"
    n = runs_mod.TAIL_LINES + 3000  # longer than the tail the table reads
    first = [{"step": s, "loss": 1.0 / s, "elapsed_s": s * 0.01,
              **({"accuracy": s / n} if s < 100 else {})} for s in range(1, n)]
    resumed = [{"step": s, "elapsed_s": 5.0 + s * 0.01} for s in range(n - 500, n + 200)]
    write(logs, "long", first + resumed)
    write(logs, "short", [{"step": s, "loss": 2.0, "elapsed_s": s * 3.0} for s in range(50)])
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        cursor = monitor.db.cursor()
        table = runs_table(cursor).set_index("run")
        for run, (lines, step, loss, accuracy, pace) in unbounded_runs(cursor).items():
            got = table.loc[run]
            assert (got["lines"], got["last_step"]) == (lines, step)
            want = [float("nan") if v is None else v for v in (loss, accuracy)]
            assert [got["last_loss"], got["last_accuracy"]] == pytest.approx(want, nan_ok=True)
            assert got["lines_per_min"] == pytest.approx(pace)
        # the long run's newest lines carry neither loss nor accuracy: found further back
        assert table.loc["long", "last_loss"] == pytest.approx(1.0 / (n - 1))
        assert table.loc["long", "last_accuracy"] == pytest.approx(99 / n)


def test_markers_are_placed_alike_on_every_axis(tmp_path):
    """Every marker's x on each axis equals the straightforward answer: the event's own
    position, else the logged line at (or before) its step; a time-axis checkpoint spans its
    start's to its end's time (it once ended where it began); an open one ends at the newest
    line. Lines every 10 steps, so an event between two lines is placed at the one before."""
    logs = tmp_path / "logs"
    rows = [{"step": s, "loss": 9.0 if s == 500 else 1.0, "elapsed_s": s * 0.5,
             "time": 1e9 + s} for s in range(10, 1001, 10)]
    write(logs, "r", rows)
    write(logs, "r", [
        {"event": "checkpoint_start", "step": 200, "elapsed_s": 100.2, "time": 1e9 + 200.2},
        {"event": "checkpoint_end", "step": 200, "elapsed_s": 103.0, "time": 1e9 + 203.0,
         "duration_s": 2.8, "blocked_s": 2.8},
        {"event": "epoch_start", "step": 305, "epoch": 1},  # no line at 305: the one at 300
        {"event": "checkpoint_start", "step": 990}], "events.jsonl")
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        cursor = monitor.db.cursor()
        cursor.execute("INSERT INTO incidents (run, kind, metric, step, end_step, causes, "
                       "evidence) VALUES ('r', 'spike', 'loss', 500, 520, [], [])")
        at = {r["step"]: (r["elapsed_s"], r["time"]) for r in rows}
        want = {"step": [(200, 200), (305, 305), (500, 520), (990, 1000)],
                "elapsed": [(100.2, 103.0), (150.0, 150.0), (250.0, 260.0), (495.0, 500.0)],
                "time": [(1e9 + 200.2, 1e9 + 203.0), at[300][1:] * 2, (at[500][1], at[520][1]),
                         (at[990][1], at[1000][1])]}
        for x, spans in want.items():
            got = markers(cursor, "r", x=x)
            assert list(got["kind"]) == ["checkpoint", "epoch", "incident", "checkpoint"]
            flat = [v for pair in zip(got["x0"], got["x1"], strict=True) for v in pair]
            assert flat == pytest.approx([v for pair in spans for v in pair]), x


def test_a_long_strip_merged_from_tiles_matches_the_lines_it_covers(tmp_path):
    """Past ``counted_lines`` tiled lines the strip is merged from blocks (chart tiles and the
    untiled tail) and a sample of their lines: each cell's bucket is the most common one
    among the current timeline's lines inside it (each block holds one bucket here, so the
    sample must find it, share 1), lines hidden by a resume are left out, and the cells
    cover the range end to end on every axis."""
    from app import tiler

    logs = tmp_path / "logs"
    first = [{"step": s, "loss": 1.0, "elapsed_s": s * 0.5,
              "buckets": [(s - 1) // 1024 % 5] * 3} for s in range(1, 5001)]
    resumed = [{"step": s, "loss": 1.0, "elapsed_s": 3000.0 + s, "buckets": [7, 7]}
               for s in range(4001, 4601)]  # hides attempt 1's steps 4001..5000
    write(logs, "long", first + resumed)
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        tiler.roll(monitor.db)
        cursor = monitor.db.cursor()
        timeline = {r["step"]: r for r in first if r["step"] < 4001}
        timeline.update({r["step"]: r for r in resumed})
        cells = bucket_strip(cursor, "long", counted_lines=0)
        # attempt 1's tiles 0..7 (tile 8 is wholly hidden), attempt 2's part of tile 9, the tail
        assert len(cells) == 10
        assert (cells["x0"].iat[0], cells["x1"].iat[-1]) == (1, 4600)
        assert (cells["x0"].diff().dropna() > 0).all()
        assert (cells["x1"].iloc[:-1].to_numpy() == cells["x0"].iloc[1:].to_numpy()).all()
        for cell in cells.itertuples():
            inside = [b for s, r in timeline.items() for b in r["buckets"]
                      if cell.x0 <= s < cell.x1 or s == cell.x1 == 4600]
            assert (cell.bucket, cell.share) == (max(set(inside), key=inside.count), 1.0)
        by_time = bucket_strip(cursor, "long", x="elapsed", counted_lines=0)
        assert list(by_time["x0"]) == [timeline[s]["elapsed_s"] for s in cells["step"]]
        assert list(by_time["bucket"]) == list(cells["bucket"])
        zoom = bucket_strip(cursor, "long", lo=1000, hi=3500, max_cells=2, counted_lines=0)
        assert len(zoom) == 2 and (zoom["x0"].iat[0], zoom["x1"].iat[-1]) == (1000, 3500)
        for cell in zoom.itertuples():
            inside = {b for s, r in timeline.items() for b in r["buckets"]
                      if cell.x0 <= s <= cell.x1}
            assert cell.bucket in inside and 0 < cell.share <= 1


def test_an_open_checkpoint_ends_at_the_newest_line_tiled_or_not(tmp_path):
    """The newest line (where an open checkpoint ends) is found from each file's tile
    watermark on: with every line in tiles, with a tail after them, and before any tile."""
    from app import tiler

    logs = tmp_path / "logs"
    write(logs, "r", [{"step": s, "loss": 1.0, "elapsed_s": s * 0.5} for s in range(1, 1025)])
    write(logs, "r", [{"event": "checkpoint_start", "step": 900, "elapsed_s": 450.0}],
          "events.jsonl")
    with Monitor.open(logs, SETTINGS) as monitor:
        monitor.tailer.catch_up()
        cursor = monitor.db.cursor()
        assert markers(cursor, "r", x="elapsed")[["x0", "x1"]].values.tolist() == [[450, 512]]
        assert tiler.roll(monitor.db) == 1024  # every line in tiles: the newest is the mark's
        assert markers(cursor, "r")[["x0", "x1"]].values.tolist() == [[900, 1024]]
        write(logs, "r", [{"step": s, "loss": 1.0, "elapsed_s": s * 0.5}
                          for s in range(1025, 1031)])
        monitor.tailer.catch_up()
        assert markers(cursor, "r", x="elapsed")[["x0", "x1"]].values.tolist() == [[450, 515]]
