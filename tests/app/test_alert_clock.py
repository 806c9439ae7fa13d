"""Stall alerts, GET /metrics and the Runs page's order by the monitor's own clock (issue 18,
finding 10), through the real server and a real webhook receiver on 127.0.0.1: logs written
line by line as a file server with a skewed clock would date them (os.utime after each line),
a day ahead or two hours behind."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app import settings as settings_mod
from app.monitor import Monitor
from tests.app.webhook_receiver import Receiver
from tests.conftest import Server, wait_for

BUDGET_S = 3.0  # the stall rule's min: lines come every 0.1 s, so 10x that is less
RULES = f"""\
[[rule]]
name = "stall"
type = "stall"
min = "{BUDGET_S:g}s"
"""
DAY, HOUR = 86400.0, 3600.0
LONG = 150_000  # lines of a long finished log


def append(path: Path, steps, skew_s: float, every_s: float = 0.1) -> float:
    """Lines of ``steps``, each dated ``skew_s`` off the real clock as soon as it is written
    (through the open file, so ingest almost never sees the true mtime between the two);
    returns when the last line was written, by the real clock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:
        for step in steps:
            out.write(json.dumps({"step": step, "loss": 1.0 / step}) + "\n")
            out.flush()
            stamp = time.time() + skew_s
            os.utime(out.fileno(), (stamp, stamp))
            time.sleep(every_s)
    return time.time() - every_s


def stalls(hook: Receiver, run: str) -> list:
    return [r for r in hook.delivered() if f"stall on {run}:" in r.json()["text"]]


def seconds_since(server: Server, run: str) -> float | None:
    page = httpx.get(server.url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name == "cliffwatch_run_seconds_since_last_line" \
                    and sample.labels.get("run") == run:
                return sample.value
    return None


@pytest.fixture(scope="module")
def hook():
    with Receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def served(tmp_path_factory, hook):
    logs = tmp_path_factory.mktemp("clock") / "logs"
    logs.mkdir()
    (logs / "alerts.toml").write_text(RULES)
    server = Server(logs, "--webhook", hook.url, "--webhook-timeout", "2",
                    "--webhook-format", "generic")
    yield server, logs
    server.stop()


def test_a_log_dated_a_day_ahead_stalls_once_it_stops_and_metrics_count_the_silence(served,
                                                                                     hook):
    """A day ahead, the stall never came (now - mtime < 0) and /metrics said 0 s forever."""
    server, logs = served
    stopped = append(logs / "ahead" / "metrics.jsonl", range(1, 21), skew_s=DAY)
    wait_for(lambda: (seconds_since(server, "ahead") or 0) >= 1.0, timeout=15, interval=0.2)
    assert seconds_since(server, "ahead") < HOUR  # counted from our clock, not the file's
    (row,) = [r for r in httpx.get(server.url + "/api/runs").json()["runs"]
              if r["run"] == "ahead"]
    assert row["last_write"] <= time.time()  # not a day ahead: the Runs page's order
    fired = wait_for(lambda: stalls(hook, "ahead"), timeout=20, interval=0.2)[0]
    assert fired.time >= stopped + BUDGET_S


def test_a_log_dated_two_hours_back_is_history_until_it_grows_then_stalls(served, hook):
    """Two hours back, the run was history at first sight (fine), but its new lines never
    made it live again: dated 2 h back too, they were older than the rules' first look."""
    server, logs = served
    path = logs / "behind" / "metrics.jsonl"
    append(path, range(1, 6), skew_s=-2 * HOUR, every_s=0.0)

    def met():  # the rules have seen the run: it is history (its lines before are not judged)
        got = server.sql("SELECT history_step FROM alert_progress WHERE run = 'behind'")
        return got.status_code == 200 and got.json()["rows"]

    assert wait_for(met, timeout=15, interval=0.2) == [[5]]
    time.sleep(BUDGET_S + 1)
    assert not stalls(hook, "behind")  # history does not stall
    stopped = append(path, range(6, 26), skew_s=-2 * HOUR)  # it grows again, then stops
    fired = wait_for(lambda: stalls(hook, "behind"), timeout=20, interval=0.2)[0]
    assert fired.time >= stopped + BUDGET_S  # not at once: silence counted from its last line
    assert fired.json()["step"] == 25


def test_history_read_in_many_chunks_keeps_its_date_and_a_new_line_is_dated_now(tmp_path):
    """What grew_at holds, through real ingest: a finished run found at start-up keeps its
    mtime however many transactions its catch-up takes (a folder of old runs must not all
    look live), a file dated ahead is dated now at the latest, and a line written later is
    dated by the monitor's clock, whatever the file says."""
    logs = tmp_path / "logs"
    old = logs / "old" / "metrics.jsonl"
    old.parent.mkdir(parents=True)
    # 5 MB with a text value (the careful path, which reads at most 1 MiB of a file a
    # transaction, MAX_LINE; a clean log would be stored whole in one): five transactions
    old.write_text("".join(f'{{"step": {s}, "loss": 1.0, "phase": "train"}}\n'
                           for s in range(1, LONG + 1)))
    two_days_ago = time.time() - 2 * DAY
    os.utime(old, (two_days_ago, two_days_ago))
    append(logs / "ahead" / "metrics.jsonl", range(1, 3), skew_s=DAY, every_s=0.0)
    monitor = Monitor.open(logs, dataclasses.replace(settings_mod.resolve(), chunk_bytes=1))
    try:
        started = time.time()
        monitor.tailer.catch_up()
        grew = dict(monitor.db.cursor().execute(
            "SELECT run, grew_at FROM files WHERE kind = 'metrics'").fetchall())
        assert grew["old"] == pytest.approx(two_days_ago)  # read in chunks, still history
        assert grew["ahead"] <= time.time()
        append(old, range(LONG + 1, LONG + 3), skew_s=-2 * HOUR, every_s=0.0)
        monitor.tailer.catch_up()
        (grew_at,) = monitor.db.cursor().execute(
            "SELECT grew_at FROM files WHERE run = 'old'").fetchone()
        assert started <= grew_at <= time.time()
    finally:
        monitor.close()


def test_lines_written_while_no_server_ran_are_dated_by_their_file_not_by_the_next_start(
        tmp_path, hook):
    """The demo's page: a run whose last lines came while no server watched (written just
    after a stop, then silent while the monitor was down) was dated by the next start's
    clock, so its stall fired a budget after that start saying "no new line for 100 s" of a
    run silent for hours. The file's own clock between two reads (skew cancels out) dates
    them: the stall fires at the start, with the silence since the last line."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "alerts.toml").write_text(RULES.replace(f'"{BUDGET_S:g}s"', '"4s"'))
    path, done = logs / "downtime" / "metrics.jsonl", threading.Event()
    writer = threading.Thread(target=lambda: write_until(path, done))
    first = Server(logs, "--webhook", hook.url, "--webhook-format", "generic")
    try:
        writer.start()

        def met():  # the rules know the run, live (not history): its silence will be a stall
            got = first.sql("SELECT history_step FROM alert_progress WHERE run = 'downtime'")
            return got.status_code == 200 and got.json()["rows"]

        assert wait_for(met, timeout=15, interval=0.2) == [[None]]
    finally:
        first.stop()  # lines go on coming for a second while no server runs
    time.sleep(1.0)
    done.set()
    writer.join()
    last_line = path.stat().st_mtime
    time.sleep(6.0)  # the monitor is down; the run has stopped
    started = time.time()
    second = Server(logs, "--webhook", hook.url, "--webhook-format", "generic")
    try:
        fired = wait_for(lambda: stalls(hook, "downtime"), timeout=20, interval=0.2)[0]
        assert fired.json()["value"] >= started - last_line  # silent since its last line
        assert fired.time < started + 4.0 + 10.0  # not a budget after the start's read
    finally:
        second.stop()


def write_until(path: Path, done: threading.Event) -> None:
    step = 0
    while not done.is_set():
        step += 1
        append(path, [step], skew_s=0.0, every_s=0.2)
