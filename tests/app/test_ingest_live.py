"""Live tailing with the real watchdog observer while another thread appends."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

from app import settings as settings_mod
from app.ingest.worker import IngestWorker
from app.monitor import Monitor
from tests.conftest import wait_for


def count(monitor: Monitor, sql: str) -> int:
    return monitor.db.cursor().execute(sql).fetchone()[0]


def append(path: Path, *objs: dict) -> None:
    with path.open("a") as handle:
        for obj in objs:
            handle.write(json.dumps(obj) + "\n")


def test_lines_appended_by_another_thread_arrive_without_polling(live):
    # tick_interval is 5 s, so rows arriving sooner were woken by inotify events
    logs, monitor = live
    (logs / "a").mkdir()
    path = logs / "a" / "metrics.jsonl"

    def writer():
        for step in range(1, 201):
            append(path, {"step": step, "loss": 1.0 / step})
            time.sleep(0.002)

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics") == 200, timeout=4.0)
    assert count(monitor, "SELECT count(DISTINCT step) FROM metrics_all") == 200


def test_partial_line_waits_for_its_newline(live):
    logs, monitor = live
    (logs / "p").mkdir()
    path = logs / "p" / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "lo')
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics_all") == 1)
    time.sleep(0.3)
    assert count(monitor, "SELECT count(*) FROM metrics_all") == 1
    with path.open("a") as handle:
        handle.write('ss": 0.5}\n')
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics_all") == 2)
    assert count(monitor, "SELECT count(*) FROM ingest_errors") == 0


def test_new_runs_and_new_metric_keys_mid_run(live):
    logs, monitor = live
    (logs / "sweep" / "lr1").mkdir(parents=True)
    path = logs / "sweep" / "lr1" / "metrics.jsonl"
    append(path, *({"step": s, "loss": 2.0} for s in range(1, 5001)))
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics") == 5000)
    append(path, {"step": 5001, "loss": 1.0, "grad_norm": 0.4})
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics") == 5001)
    rows = monitor.db.cursor().execute(
        "SELECT step, loss, grad_norm FROM metrics WHERE run = 'sweep/lr1' AND step >= 5000 "
        "ORDER BY step").fetchall()
    assert rows == [(5000, 2.0, None), (5001, 1.0, 0.4)]
    (logs / "second").mkdir()
    append(logs / "second" / "metrics.jsonl", {"step": 1, "accuracy": 0.1})
    wait_for(lambda: count(monitor, "SELECT count(*) FROM runs") == 2)


def test_resume_replace_and_truncate_start_new_attempts(live):
    logs, monitor = live
    (logs / "r").mkdir()
    path = logs / "r" / "metrics.jsonl"
    append(path, *({"step": s, "loss": 10.0 - s} for s in (10, 20, 30, 40)))
    append(path, *({"step": s, "loss": 5.0 - s / 100} for s in (20, 30)))  # resumed from 20
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics_all") == 6)
    cur = monitor.db.cursor()
    assert cur.execute("SELECT step, attempt FROM metrics ORDER BY step").fetchall() == [
        (10, 1), (20, 2), (30, 2)]  # step 40 of attempt 1 is past the resume point
    replacement = logs / "r" / "metrics.jsonl.new"
    replacement.write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n")
    replacement.rename(path)  # a new inode under the same name
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics_all") == 7)
    path.write_text(json.dumps({"step": 1, "loss": 2.5}) + "\n")  # truncated and rewritten
    wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics_all") == 8)
    reasons = cur.execute("SELECT attempt, reason FROM attempts ORDER BY attempt").fetchall()
    assert [r[1] for r in reasons] == ["start", "step_back", "file_replaced", "file_replaced"]
    assert cur.execute("SELECT step, loss FROM metrics").fetchall() == [(1, 2.5)]
    assert count(monitor, "SELECT count(*) FROM metrics_all") == 8  # nothing overwritten


def test_polling_observer_for_network_filesystems(tmp_path):
    # --poll: no inotify; the polling observer's events still wake the worker
    logs = tmp_path / "logs"
    (logs / "nfs").mkdir(parents=True)
    settings = dataclasses.replace(settings_mod.resolve(), scan_interval=0.5, tick_interval=30.0)
    monitor = Monitor.open(logs, settings)
    worker = IngestWorker(monitor.tailer, settings, poll=True)
    worker.start()
    try:
        append(logs / "nfs" / "metrics.jsonl", {"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.9})
        wait_for(lambda: count(monitor, "SELECT count(*) FROM metrics") == 2, timeout=10)
    finally:
        worker.stop()
        monitor.close()
