"""Stall rules (timer-driven, from the files' stored write times) and the alert worker thread
with the real ingest worker. Time is passed in relative to the files' real mtime."""

from __future__ import annotations

import dataclasses
import time

import pytest

from app import settings as settings_mod
from app.alerts.delivery import DeliveryWorker
from app.alerts.judge_worker import AlertWorker
from app.alerts.rules import Rule
from app.alerts.targets import targets
from app.ingest.worker import IngestWorker
from tests.app.test_alert_engine import Bench
from tests.conftest import wait_for

STALL = Rule(name="stall", type="stall", severity="critical", stall_factor=10.0, min_s=5.0,
             checkpoint_budget_s=30.0)


@pytest.fixture
def bench(tmp_path):
    made = []

    def make(rules) -> Bench:
        made.append(Bench(tmp_path, rules))
        return made[-1]

    yield make
    for b in made:
        b.monitor.close()


def lines(first: int, last: int, gap_s: float = 0.1) -> list[dict]:
    return [{"step": s, "loss": 1.0, "time": 1_000.0 + s * gap_s} for s in range(first, last + 1)]


def last_write(b: Bench, run: str) -> float:
    return max(p.stat().st_mtime for p in (b.logs / run).glob("*.jsonl"))


def kinds(b: Bench) -> list[str]:
    return [n["kind"] for n in b.notes()]


def test_stall_with_min_5s_fires_and_resolves_when_lines_come_back(bench):
    b = bench([STALL])
    b.write("r", *lines(1, 50))  # typical interval 0.1 s: 10x is 1 s, so min = 5 s rules
    b.step()
    t0 = last_write(b, "r")
    b.step(t0 + 4.5)
    assert kinds(b) == []
    b.step(t0 + 5.5)
    (firing,) = b.notes()
    assert firing["facts"]["step"] == 50 and firing["facts"]["budget_s"] == 5.0
    assert firing["facts"]["typical"] == pytest.approx(0.1)
    # the figures of the Value field (5.5 s), not 6 next to 5.5 (issue 20, item 11)
    assert firing["facts"]["summary"].startswith(
        "no new line for 5.5 s (budget 5 s: 10x the typical")
    b.step(t0 + 30)
    assert kinds(b) == ["firing"]
    b.write("r", *lines(51, 52))
    b.step()
    assert kinds(b) == ["firing", "resolved"]
    assert b.notes()[-1]["facts"]["summary"].startswith("lines came back after")
    assert b.transitions("stall") == [("inactive", "pending", 50), ("pending", "firing", 50),
                                      ("firing", "resolved", 52)]


def test_a_silence_of_hours_is_said_in_hours_beside_its_figure(bench):
    """A run that died while no server watched pages at the next start with hours of
    silence: "11105 s" alone made the reader do the sum."""
    b = bench([STALL])
    b.write("r", *lines(1, 50))
    b.step()
    b.step(last_write(b, "r") + 3 * 3600 + 5 * 60 + 5)
    (firing,) = b.notes()
    assert firing["facts"]["summary"].startswith(
        "no new line for 11105 s, about 3h5m (budget 5 s: 10x the typical")


def test_budget_adapts_to_the_runs_interval(bench):
    b = bench([STALL])
    b.write("r", *lines(1, 30, gap_s=2.0))  # 10 x 2 s = 20 s > min 5 s
    b.step()
    t0 = last_write(b, "r")
    b.step(t0 + 15)
    assert kinds(b) == []
    b.step(t0 + 21)
    assert kinds(b) == ["firing"] and b.notes()[0]["facts"]["budget_s"] == 20.0


def test_checkpoint_start_without_end_fires_naming_the_checkpoint(bench):
    b = bench([STALL])
    b.write("r", *lines(1, 100))
    b.write("r", {"event": "checkpoint_start", "step": 100, "path": "ckpt/step100.pt"},
            file="events.jsonl")
    b.step()
    t0 = last_write(b, "r")
    b.step(t0 + 20)  # past min (5 s), within checkpoint_budget (30 s): a save is slow, not hung
    assert kinds(b) == []
    b.step(t0 + 31)
    (firing,) = b.notes()
    assert firing["facts"]["checkpoint"]["step"] == 100
    assert firing["facts"]["checkpoint"]["path"] == "ckpt/step100.pt"
    assert firing["facts"]["summary"].startswith("checkpoint at step 100 has not ended")
    b.write("r", {"event": "checkpoint_end", "step": 100}, file="events.jsonl")
    b.step()
    assert kinds(b) == ["firing", "resolved"]


def test_run_end_never_stalls_and_ends_a_stall(bench):
    b = bench([STALL])
    b.write("done", *lines(1, 20))
    b.write("done", {"event": "run_end", "step": 20, "status": "completed"}, file="events.jsonl")
    b.write("hung", *lines(1, 20))
    b.step()
    t0 = max(last_write(b, "done"), last_write(b, "hung"))
    b.step(t0 + 1000)
    assert [(n["facts"]["run"], n["kind"]) for n in b.notes()] == [("hung", "firing")]
    b.write("hung", {"event": "run_end", "status": "failed"}, file="events.jsonl")
    b.step(time.time() + 1000)
    assert kinds(b) == ["firing", "resolved"]
    assert b.notes()[-1]["facts"]["summary"] == "run ended (failed)"


def test_stall_begun_before_a_restart_fires_on_time_after_it(bench):
    b = bench([dataclasses.replace(STALL, for_s=10.0)])
    b.write("r", *lines(1, 50))
    b.step()
    t0 = last_write(b, "r")
    b.step(t0 + 6)
    assert b.sql("SELECT state, pending_time FROM alert_states") == [("pending", t0 + 5.0)]
    b.restart()  # nothing in memory survives; the stored write time and state do
    b.step(t0 + 14)
    assert kinds(b) == []
    b.step(t0 + 15.5)
    assert kinds(b) == ["firing"]
    b.restart()
    b.step(t0 + 16)
    assert kinds(b) == ["firing"]


def test_worker_timer_fires_a_stall_without_any_poke(bench):
    b = bench([STALL])
    b.write("r", *lines(1, 20))
    b.monitor.tailer.catch_up()
    skew = [0.0]
    poked = []
    worker = AlertWorker(b.monitor.db, [STALL], settings_mod.resolve(), targets(
        settings_mod.resolve()), on_outbox=lambda: poked.append(1),
        clock=lambda: time.time() + skew[0])
    worker.start()
    try:
        wait_for(lambda: worker.passes > 0, timeout=5)
        skew[0] = 10.0  # ten seconds later, as the clock sees it: no line, no poke
        wait_for(lambda: b.sql("SELECT count(*) FROM notifications")[0][0] == 1, timeout=5)
        wait_for(lambda: poked, timeout=2)
    finally:
        worker.stop()
    assert worker.failure is None


def test_live_pipeline_line_to_delivered_notification(bench):
    rule = Rule(name="loss-high", type="threshold", metric="loss", op=">", value=5.0)
    b = bench([rule])
    settings = dataclasses.replace(settings_mod.resolve(), tick_interval=5.0)
    ingest = IngestWorker(b.monitor.tailer, settings)
    delivery = DeliveryWorker(b.monitor.db, settings, "http://127.0.0.1:1")
    alerts = AlertWorker(b.monitor.db, [rule], settings, delivery.targets,
                         on_outbox=delivery.poke)
    ingest.listeners.append(alerts.poke)
    ingest.start()
    delivery.start()
    alerts.start()
    try:
        b.write("r", {"step": 1, "loss": 1.0})
        wait_for(lambda: b.sql("SELECT count(*) FROM alert_progress")[0][0] == 1, timeout=5)
        b.write("r", {"step": 2, "loss": 9.0})  # woken by inotify -> ingest -> poke
        wait_for(lambda: b.sql("SELECT status FROM outbox") == [("sent",)], timeout=5)
    finally:
        ingest.stop()
        alerts.stop()
        delivery.stop()
    assert [(n["kind"], n["facts"]["step"]) for n in b.notes()] == [("firing", 2)]
