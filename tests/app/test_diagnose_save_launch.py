"""A save explains the stall of its own launch (app/diagnose/causes.py, ``_save_in``). After a
resume the steps repeat: the first launch saved at step 20 (blocked 30.0 s) and so did the
resumed one (blocked 50.0 s), which logs every second step (so its stall has a key of its own:
after step 22). Each launch's stall must quote its own save's seconds, though both saves sit at
the window's steps; the lines' and events' ``time`` say which is which. Whole-run and live
diagnosis alike."""

from __future__ import annotations

import json

from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose
from tests.app.test_ingest_bad_input import ingest, query

START = 1_780_000_000.0


def launch(steps: range, t0: float, blocked: float) -> tuple[list[dict], list[dict]]:
    """Lines at ``steps`` 1 s apart, a save at step 20 blocking ``blocked`` s (its end written
    just before the next line's), and the events of it."""
    lines, events, t = [], [], t0
    for step in steps:
        if step == 20 + steps.step:
            t += blocked
            events.append({"event": "checkpoint_end", "step": 20, "time": t - 0.5,
                           "blocked_s": blocked, "duration_s": blocked})
        lines.append({"step": step, "loss": 0.7, "time": t})
        t += 1.0
    return lines, events


def test_each_launchs_stall_quotes_its_own_save(tmp_path):
    run = tmp_path / "logs" / "resumed"
    run.mkdir(parents=True)
    first, saved_first = launch(range(1, 41), START, 30.0)
    second, saved_second = launch(range(10, 41, 2), START + 1000, 50.0)
    resume = {"event": "resume", "step": 10, "from_step": 10, "time": START + 999}
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in first + second))
    (run / "events.jsonl").write_text("".join(
        json.dumps(x) + "\n" for x in [*saved_first, resume, *saved_second]))
    with ingest(tmp_path / "logs") as mon:
        whole = [(i.value, i.causes, i.evidence) for i in diagnose(mon.db.cursor(), Watch())
                 if i.kind == "stall"]
        LiveDiagnosis(mon.db, Watch()).update()
        live = query(mon, "SELECT value, causes, evidence FROM incidents WHERE kind = 'stall'")
    for stalls in (sorted(whole), sorted(live)):
        assert [round(value) for value, _, _ in stalls] == [31, 51], stalls
        for (_, causes, evidence), blocked in zip(stalls, ("30.0 s", "50.0 s"), strict=True):
            assert causes[0] == "checkpoint", evidence
            assert f"blocked the training loop for {blocked}" in evidence[0], evidence
