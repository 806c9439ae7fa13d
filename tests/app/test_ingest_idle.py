"""Idle cost follows activity, not history (issue 12): with 2,000 finished runs caught up, an
idle ingest tick looks at no file; a line appended to one of them still arrives through its
watchdog event, and a change no event reported arrives through the slow sweep.

Work is counted, never timed: the ``stat``/``open``/``scandir`` calls the ingest thread makes
(an audit hook for ``open`` and ``os.scandir``, and a counting wrapper around ``os.stat``
that calls the real one), while the real worker runs with its real watchdog observer."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from app import settings as settings_mod
from app.ingest.worker import IngestWorker
from app.monitor import Monitor
from tests.conftest import wait_for

RUNS = 2000
INGEST_THREAD = "cliffwatch-ingest"


def write_run(folder: Path, finished: bool = True) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n" for s in range(3)))
    events = [{"event": "run_start", "step": 0}]
    if finished:
        events.append({"event": "run_end", "step": 2, "status": "completed"})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """2,000 finished runs (and one live one), caught up once for the module's tests."""
    logs = tmp_path_factory.mktemp("fleet") / "logs"
    for i in range(RUNS):
        write_run(logs / f"team{i % 10}" / f"run-{i:04d}")
    write_run(logs / "live" / "run-0", finished=False)
    with Monitor.open(logs, settings_mod.resolve()) as monitor:
        monitor.tailer.catch_up()
        assert count(monitor, "SELECT count(*) FROM runs WHERE status = 'completed'") == RUNS
    return logs


@pytest.fixture
def serve(fleet):
    """Start the real worker (real inotify observer) on the fleet with these settings."""
    started = []

    def start(**overrides):
        settings = dataclasses.replace(settings_mod.resolve(), **overrides)
        monitor = Monitor.open(fleet, settings)
        worker = IngestWorker(monitor.tailer, settings)
        worker.start()
        started.append((monitor, worker))
        wait_for(lambda: worker.ticks >= 1)  # the first full look after the watches are set
        return monitor, worker

    yield start
    for monitor, worker in started:
        worker.stop()
        monitor.close()


class Calls:
    """Counts the file system calls the ingest thread makes on paths containing ``under``
    (the finished runs' team* folders: the live run's files are looked at every tick, as they
    should be)."""

    def __init__(self):
        self.counts = {"stat": 0, "open": 0, "os.scandir": 0}
        self.on, self.under = False, "/team"

    def __enter__(self):
        self.on = True
        return self

    def __exit__(self, *exc):
        self.on = False

    def note(self, what: str, path) -> None:
        if not self.on or threading.current_thread().name != INGEST_THREAD:
            return
        if isinstance(path, str | bytes | Path) and self.under in os.fsdecode(path):
            self.counts[what] += 1


@pytest.fixture
def calls(monkeypatch):
    counter = Calls()
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        counter.note("stat", path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    # audit hooks cannot be removed: the counter goes quiet when the test ends
    sys.addaudithook(lambda event, args: counter.note(event, args[0])
                     if event in ("open", "os.scandir") else None)
    return counter


def count(monitor: Monitor, sql: str) -> int:
    return monitor.db.cursor().execute(sql).fetchone()[0]


def append(path: Path, step: int) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps({"step": step, "loss": 0.01}) + "\n")


def steps(monitor: Monitor, run: str) -> int:
    return monitor.db.cursor().execute("SELECT count(*) FROM metrics WHERE run = ?",
                                       [run]).fetchone()[0]


def test_idle_ticks_look_at_no_finished_run(serve, calls):
    # the sweep's share over 1 hour is 4,000 files x 1 s / 3600 s: about one file in the
    # second counted; before, every tick stat-ed every file (4,000 calls a tick)
    _, worker = serve(tick_interval=0.02, scan_interval=3600.0)
    ticks = worker.ticks
    with calls:
        wait_for(lambda: worker.ticks >= ticks + 40, timeout=60)
    assert calls.counts["open"] == 0, calls.counts
    assert calls.counts["os.scandir"] <= 2, calls.counts
    assert calls.counts["stat"] <= 4, calls.counts


def test_a_line_appended_to_a_finished_run_arrives_through_its_event(serve, fleet):
    monitor, _ = serve(tick_interval=30.0, scan_interval=3600.0)
    run = "team1/run-0001"
    append(fleet / run / "metrics.jsonl", 3)
    wait_for(lambda: steps(monitor, run) == 4, timeout=10)


def test_a_change_no_event_reported_arrives_by_the_sweep(serve, fleet):
    monitor, worker = serve(tick_interval=0.05, scan_interval=2.0)
    worker.watching.stop()  # the observer is gone: from now on no event comes
    run = "team2/run-0002"
    append(fleet / run / "metrics.jsonl", 3)
    write_run(fleet / "team3" / "late-run")  # a new folder, found by the sweep's walk
    started = time.monotonic()
    wait_for(lambda: steps(monitor, run) == 4 and steps(monitor, "team3/late-run") == 3,
             timeout=20)
    assert time.monotonic() - started < 2 * 2.0 + 2  # within about one sweep


def test_a_live_run_is_looked_at_every_tick_without_events(serve, fleet):
    # a network filesystem without --poll sends no events: a live run's lines still arrive
    # at tick rate, not only with the (hour-long) sweep
    monitor, worker = serve(tick_interval=0.05, scan_interval=3600.0)
    worker.watching.stop()
    append(fleet / "live" / "run-0" / "metrics.jsonl", 3)
    wait_for(lambda: steps(monitor, "live/run-0") == 4, timeout=10)


# ---- events name the files: with no tick timer and no sweep to fall back on ----------------

@pytest.fixture
def evented(tmp_path):
    """A small log directory whose worker reads only what events name (the tick timer and
    the sweep are an hour away)."""
    logs = tmp_path / "logs"
    write_run(logs / "a")
    settings = dataclasses.replace(settings_mod.resolve(), tick_interval=3600.0,
                                   scan_interval=3600.0)
    monitor = Monitor.open(logs, settings)
    worker = IngestWorker(monitor.tailer, settings)
    worker.start()
    wait_for(lambda: worker.ticks >= 1)
    yield logs, monitor
    worker.stop()
    monitor.close()


def test_a_file_renamed_onto_a_tracked_name_is_read_again(evented):
    # run.json written atomically (a new file renamed onto the old name): one "moved" event
    logs, monitor = evented
    (logs / "a" / "run.json").write_text(json.dumps({"world_size": 2}))
    wait_for(lambda: count(monitor, "SELECT count(*) FROM runs WHERE world_size = 2") == 1)
    (logs / "a" / "run.json.tmp").write_text(json.dumps({"world_size": 8}))
    os.replace(logs / "a" / "run.json.tmp", logs / "a" / "run.json")
    wait_for(lambda: count(monitor, "SELECT count(*) FROM runs WHERE world_size = 8") == 1)


def test_a_rotated_log_is_read_to_its_end_and_the_new_one_from_its_start(evented):
    logs, monitor = evented
    log = logs / "a" / "metrics.jsonl"
    append(log, 3)
    wait_for(lambda: steps(monitor, "a") == 4)
    with log.open("a") as old:
        log.rename(logs / "a" / "metrics.jsonl.1")  # logrotate's create
        old.write(json.dumps({"step": 4, "loss": 0.1}) + "\n")  # the trainer's open handle
        old.flush()
        append(log, 5)
    wait_for(lambda: steps(monitor, "a") == 6)
    assert count(monitor, "SELECT count(DISTINCT step) FROM metrics_all WHERE run = 'a'") == 6


def test_a_run_folder_moved_in_is_found(evented, tmp_path):
    logs, monitor = evented
    write_run(tmp_path / "elsewhere" / "b")
    (tmp_path / "elsewhere" / "b").rename(logs / "b")
    wait_for(lambda: steps(monitor, "b") == 3)


def test_a_run_that_ends_is_no_longer_looked_at_every_tick(tmp_path, calls):
    logs = tmp_path / "logs"
    write_run(logs / "ending", finished=False)
    settings = dataclasses.replace(settings_mod.resolve(), tick_interval=0.02,
                                   scan_interval=3600.0)
    with Monitor.open(logs, settings) as monitor:
        worker = IngestWorker(monitor.tailer, settings)
        worker.start()
        try:
            calls.under = "/ending/"
            with calls:  # live: its two files are looked at every tick, event or not
                wait_for(lambda: worker.ticks >= 10)
            assert calls.counts["stat"] >= 2 * 8, calls.counts
            with (logs / "ending" / "events.jsonl").open("a") as handle:
                handle.write(json.dumps({"event": "run_end", "step": 2, "status": "failed"})
                             + "\n")
            wait_for(lambda: count(monitor, "SELECT count(*) FROM runs WHERE status = 'failed'"))
            ticks, calls.counts["stat"] = worker.ticks, 0
            with calls:
                wait_for(lambda: worker.ticks >= ticks + 40)
            assert calls.counts["stat"] <= 2, calls.counts
        finally:
            worker.stop()
