"""A log that stopped growing before cliffwatch first saw it is no stall (issue 20, item 4):
a finished TensorBoard file and a finished llm.c log (no time field, no end line), copied with
their modification time of half an hour ago, fire no stall alert and are "stopped" on the Runs
page, not "stalled", while a run that goes quiet under cliffwatch's eyes still stalls."""

from __future__ import annotations

import os
import time

from app.alerts.rules import default_rules
from app.read import runs
from tests.app.test_alert_engine import Bench
from tests.app.test_foreign_runs_drawn import STEPS, llmc, tensorboard

AGO = 1800.0  # under the hour that made a run history when first met (engine.HISTORY_S)


def finished(bench: Bench, now: float) -> None:
    """A TensorBoard run and an llm.c run, each last written AGO seconds before now."""
    tensorboard(bench.logs / "tb-done", start=now - AGO - STEPS)
    llmc(bench.logs / "llmc-done")
    for run in ("tb-done", "llmc-done"):
        for path in (bench.logs / run).iterdir():
            os.utime(path, (now - AGO, now - AGO))


def states(bench: Bench, now: float) -> dict[str, str]:
    table = runs.page(bench.monitor.db.cursor(), runs.Ask(limit=None), now).table
    return dict(zip(table["run"], table["state"], strict=True))


def test_a_log_finished_before_cliffwatch_started_neither_stalls_nor_pages(tmp_path):
    bench = Bench(tmp_path, default_rules())
    try:
        now = time.time()
        finished(bench, now)
        bench.write("live", *({"step": s, "loss": 1.0, "time": now - 20 + s} for s in range(20)))
        bench.step(now)
        bench.step(now + 30)
        assert bench.sql("SELECT run, state FROM alert_states WHERE rule = 'stall'") == []
        assert states(bench, now + 30) == {"tb-done": "stopped", "llmc-done": "stopped",
                                           "live": "live"}
        # past any budget of theirs and past idle_after; the live run, watched and silent
        # for 5 minutes, is a stall
        bench.step(now + 300)
        assert bench.sql("SELECT run, state FROM alert_states WHERE rule = 'stall'") == [
            ("live", "firing")]
        assert states(bench, now + 300) == {"tb-done": "stopped", "llmc-done": "stopped",
                                            "live": "stalled"}
    finally:
        bench.monitor.close()


def test_a_stopped_log_that_writes_again_can_stall(tmp_path):
    """Stopped is a state until the log writes again: then a silence is a stall once more."""
    bench = Bench(tmp_path, default_rules())
    try:
        now = time.time()
        finished(bench, now)
        bench.step(now)
        assert states(bench, now + 30)["llmc-done"] == "stopped"
        with (bench.logs / "llmc-done" / "main.log").open("a") as log:
            log.write(f"s:{STEPS} trl:1.0000 lr:0.000100 norm:1.0000\n")
        bench.step(now + 1)
        assert states(bench, now + 100)["llmc-done"] == "stalled"
    finally:
        bench.monitor.close()
