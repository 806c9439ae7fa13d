"""Live diagnosis costs what a tick's new lines cost (issue 10, section 2): a tick stores only
the incidents its lines found or grew (an open cliff does not rewrite the run's other
incidents), and causes judged from an incident's own window are those the whole run gives.
The per-tick time at 10k/100k/1M lines is measured in bench/diagnose.py, not here."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from app.db import queries
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis, LiveRun, diagnose
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SAMPLES


def test_a_tick_stores_only_the_incidents_it_changed(tmp_path):
    """The seed ends inside its accuracy cliff, so every new low line grows it."""
    run = tmp_path / "logs" / "seed"
    shutil.copytree(SAMPLES / "seed-cliff", run)
    with ingest(tmp_path / "logs") as mon:
        live = LiveDiagnosis(mon.db, Watch())
        assert live.update() == 5
        sql = "SELECT kind, step, end_step, causes, evidence, updated_at FROM incidents"
        before = {(r[0], r[1]): r for r in query(mon, sql)}
        last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        with (run / "metrics.jsonl").open("a") as handle:
            for step in range(last["step"] + 2, last["step"] + 12, 2):
                elapsed = last["elapsed_s"] + 5 * (step - last["step"])
                handle.write(json.dumps({**last, "step": step, "accuracy": 0.005,
                                         "elapsed_s": elapsed}) + "\n")
        mon.tailer.tick(discover=True)
        assert live.update() == 1
        after = {(r[0], r[1]): r for r in query(mon, sql)}
    cliff = ("cliff", 4231)
    assert after[cliff][2] == last["step"] + 10 and after[cliff][3:5] == before[cliff][3:5]
    assert {k: v for k, v in after.items() if k != cliff} == {
        k: v for k, v in before.items() if k != cliff}


def resumed_copy(tmp_path):
    """The seed with a restart from step 3000 and long single-bucket runs that span ticks."""
    run = tmp_path / "logs" / "seed"
    shutil.copytree(SAMPLES / "seed-cliff", run)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    resumed = [dict(x) for x in lines if 3000 < x["step"] <= 3300]
    resumed[2]["loss"] = 12.0  # a spike just after the restart: blamed on the resume
    for x in lines[1500:1700]:
        x["buckets"] = [7] * len(x.get("buckets") or [1])
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines[:1800]))
    with (run / "metrics.jsonl").open("a") as handle:
        handle.write("".join(json.dumps(x) + "\n" for x in resumed + lines[1800:]))
    return run


@pytest.mark.parametrize("sample", ["seed", "resumed"])
def test_causes_from_windows_equal_the_whole_runs(tmp_path, sample):
    if sample == "seed":
        shutil.copytree(SAMPLES / "seed-cliff", tmp_path / "logs" / "seed")
    else:
        resumed_copy(tmp_path)
    with ingest(tmp_path / "logs") as mon:
        cursor = mon.db.cursor()
        whole = {i.key: (i.causes, i.evidence) for i in diagnose(cursor, Watch(), ["seed"])}
        table = queries.arrow(cursor, "run_lines", {"run": "seed", "after": -1})
        rng, live, start = random.Random(3), LiveRun("seed", Watch()), 0
        while start < table.num_rows:  # as the lines arrive, in batches of any size
            stop = min(table.num_rows, start + rng.randint(1, 200))
            live.feed(table.slice(start, stop - start), Watch())
            start = stop
        assert all(live.windows.get(k) is not None for k in live.found)
        live.attribute(cursor, list(live.found.values()))
    windowed = {k: (i.causes, i.evidence) for k, i in live.found.items()}
    assert windowed == whole
    assert sum("bucket_homogeneity" in c for c, _ in whole.values()) >= 1
    if sample == "resumed":
        assert any("resume" in c for c, _ in whole.values())


def test_an_event_read_after_its_incident_still_changes_its_causes(tmp_path):
    """events.jsonl and metrics.jsonl are read apart: the checkpoint_end that explains a stall
    can land after the stall's lines, once the incident has stopped changing. (A full CI run
    saw the stall at step 4019 keep "checkpoint ... began" for good.)"""
    run = tmp_path / "logs" / "seed"
    shutil.copytree(SAMPLES / "seed-cliff", run)
    events = (run / "events.jsonl").read_text().splitlines()
    late = [e for e in events if '"checkpoint_end"' in e and '"step": 4001' in e]
    (run / "events.jsonl").write_text("".join(e + "\n" for e in events if e not in late))
    sql = "SELECT evidence FROM incidents WHERE kind = 'stall' AND step = 4019"
    with ingest(tmp_path / "logs") as mon:
        live = LiveDiagnosis(mon.db, Watch())
        live.update()
        assert "blocked" not in " ".join(query(mon, sql)[0][0])
        with (run / "events.jsonl").open("a") as handle:
            handle.write(late[0] + "\n")
        mon.tailer.tick(discover=True)
        assert live.update() >= 1
        assert "blocked the training loop for 100.0 s" in " ".join(query(mon, sql)[0][0])
        assert live.update() == 0  # judged once: a later tick with nothing new stores nothing


def test_an_event_that_lands_as_its_open_incident_grows_changes_its_causes(tmp_path):
    """A window's events are read once and kept, so the tick that grows an open incident must
    still read them again when an event lands in its window: here the epoch_start that the
    seed's cliff follows, read after the cliff was found (its lines said epoch 2 already)."""
    run = tmp_path / "logs" / "seed"
    shutil.copytree(SAMPLES / "seed-cliff", run)
    events = (run / "events.jsonl").read_text().splitlines()
    late = [e for e in events if '"epoch_start"' in e and '"step": 4228' in e]
    (run / "events.jsonl").write_text("".join(e + "\n" for e in events if e not in late))
    sql = "SELECT end_step, evidence FROM incidents WHERE kind = 'cliff' AND step = 4231"
    with ingest(tmp_path / "logs") as mon:
        live = LiveDiagnosis(mon.db, Watch())
        live.update()
        assert "epoch_start event" not in " ".join(query(mon, sql)[0][1])
        last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        with (run / "metrics.jsonl").open("a") as handle:  # the cliff goes on ...
            handle.write(json.dumps({**last, "step": last["step"] + 2,
                                     "elapsed_s": last["elapsed_s"] + 10}) + "\n")
        with (run / "events.jsonl").open("a") as handle:  # ... as the late event lands
            handle.write(late[0] + "\n")
        mon.tailer.tick(discover=True)
        assert live.update() == 1
        end_step, evidence = query(mon, sql)[0]
    assert end_step == last["step"] + 2
    assert "epoch 2 began at step 4228 (epoch_start event)" in " ".join(evidence)
