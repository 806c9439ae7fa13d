"""A resource error (out of memory, an aborted transaction) says nothing about a line: the line
is retried, never skipped, while other files keep going and /api/health can tell."""

from __future__ import annotations

import json
import threading
import time

from app.ingest.worker import IngestWorker
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import wait_for

HEAVY = "SELECT len(list(random())) FROM range(30000000)"


def _hammer(server, stop: threading.Event, outcomes: list[int]) -> None:
    while not stop.is_set():
        try:
            outcomes.append(server.sql(HEAVY).status_code)
        except Exception:  # a timed-out request is one more outcome
            outcomes.append(-1)


def _count(server, sql: str) -> int:
    """The count, asked again while the small memory limit refuses the query itself."""
    refusals = []

    def answer():
        response = server.sql(sql)
        refusals.append(response.text[:300])
        return response.status_code == 200 and [response.json()["rows"][0][0]]

    try:
        return wait_for(answer, timeout=20)[0]
    except AssertionError:
        raise AssertionError(f"{sql} refused for 20 s: {refusals[-1]}") from None


def test_heavy_queries_never_make_ingest_skip_a_line(tmp_path, make_server):
    logs = tmp_path / "logs"
    run = logs / "r"
    run.mkdir(parents=True)
    path = run / "metrics.jsonl"
    path.write_text(json.dumps({"step": 0, "loss": 1.0}) + "\n")
    server = make_server(logs, "--memory-limit", "48MB")
    wait_for(lambda: _count(server, "SELECT count(*) FROM metrics_all") == 1)
    stop, outcomes = threading.Event(), []
    hammers = [threading.Thread(target=_hammer, args=(server, stop, outcomes))
               for _ in range(2)]
    for thread in hammers:
        thread.start()
    try:
        with path.open("a") as handle:
            for step in range(1, 3001):
                handle.write(json.dumps({"step": step, "loss": 1.0 / step}) + "\n")
                handle.flush()
                if step % 10 == 0:
                    time.sleep(0.004)
        time.sleep(2.0)
    finally:
        stop.set()
        for thread in hammers:
            thread.join(timeout=60)
    stored = []
    wait_for(lambda: stored.append(_count(server, "SELECT count(*) FROM metrics_all"))
             or stored[-1] >= 3001, timeout=30)
    assert stored[-1] == 3001
    assert _count(server, "SELECT count(DISTINCT step) FROM metrics_all") == 3001
    assert _count(server, "SELECT count(*) FROM ingest_errors") == 0
    with path.open("a") as handle:  # and ingest keeps going
        handle.write(json.dumps({"step": 3001, "loss": 0.1}) + "\n")
    wait_for(lambda: _count(server, "SELECT count(*) FROM metrics_all") == 3002, timeout=10)
    print("heavy query outcomes:", {s: outcomes.count(s) for s in set(outcomes)})


def test_a_conflict_is_retried_with_backoff_and_shown_not_skipped(tmp_path):
    # another transaction holds the file's row: storing fails for a reason that is no line's
    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    path = run / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    with ingest(tmp_path / "logs") as mon:
        blocker = mon.db.con.cursor()
        blocker.execute("BEGIN TRANSACTION")
        blocker.execute("UPDATE files SET updated_at = NULL WHERE kind = 'metrics'")
        with path.open("a") as handle:
            handle.write("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n"
                                 for s in range(2, 7)))
        mon.tailer.tick()
        failure = IngestWorker(mon.tailer, mon.tailer.settings).failure
        assert failure.startswith("ingest of r/metrics.jsonl failing for ")
        assert "TransactionException" in failure and failure.endswith("; retrying")
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(1,)]
        blocker.execute("ROLLBACK")
        mon.tailer.tick()  # inside its backoff (0.5 s): not tried yet
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(1,)]
        time.sleep(0.6)
        mon.tailer.tick()
        assert mon.tailer.failure is None
        assert query(mon, "SELECT count(*), max(step) FROM metrics_all") == [(6, 6)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]
