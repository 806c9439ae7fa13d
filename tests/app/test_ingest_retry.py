"""A resource error (out of memory, an aborted transaction) says nothing about a line: the line
is retried, never skipped, while other files keep going and /api/health can tell."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from app.ingest.backoff import MAX_DELAY_S, Backoff
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
        # a bare 500 means an exception escaped the API: the server's log has its trace
        log = Path(server.log.name).read_text(errors="replace")[-3000:]
        raise AssertionError(f"{sql} refused for 20 s: {refusals[-1]}\nserver log:\n{log}") \
            from None


def _health(server) -> dict:
    return httpx.get(server.url + "/api/health", timeout=10).json()


def test_heavy_queries_never_blind_the_monitor(tmp_path, make_server):
    """Two loops of a query that holds memory (list() over 30 M rows) while 3,000 lines arrive,
    at a small memory limit, and no restart: every line is stored once, none is skipped, and
    health comes back to ok. Such a query is stopped while DuckDB holds two thirds of its
    limit; if DuckDB invalidates the database anyway, the server opens it again by itself
    (issue 18, finding 6: it stopped storing anything until a restart, in 4 of 6 runs)."""
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
    # a file that kept running out of memory waits out its backoff (up to MAX_DELAY_S) before
    # its next try, however soon the pressure ended
    try:
        wait_for(lambda: stored.append(_count(server, "SELECT count(*) FROM metrics_all"))
                 or stored[-1] >= 3001, timeout=2 * MAX_DELAY_S + 10)
        wait_for(lambda: _health(server)["state"] == "ok", timeout=30)
    except AssertionError:
        log = Path(server.log.name).read_text(errors="replace")[-3000:]
        raise AssertionError(f"stored {stored[-3:]} of 3001; health {_health(server)}\n"
                             f"server log:\n{log}") from None
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


def _write(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))


def _wide(step: int, keys: int) -> dict:
    return {"step": step} | {f"k{k}": 1.0 for k in range(keys)}


def test_the_column_cap_fits_the_memory_limit(tmp_path):
    # an insert pins a 256 KiB block per column of the table: at 64MB, 300 columns cannot
    # take a row, and at the default cap (1000) every later line of every run was refused
    logs = tmp_path / "logs"
    _write(logs / "wide" / "metrics.jsonl", [_wide(s, 300) for s in range(5)])
    _write(logs / "big" / "metrics.jsonl",
           [{"step": s, "loss": 1.0, "acc": 0.1} for s in range(20_000)])
    with ingest(logs, memory_limit="64MB") as mon:
        for _ in range(3):
            mon.tailer.tick()
        assert mon.tailer.failure is None
        assert query(mon, "SELECT run, count(*) FROM metrics_all GROUP BY run ORDER BY run") \
            == [("big", 20_000), ("wide", 5)]
        assert query(mon, "SELECT max(cardinality(extra_metrics)) FROM metric_rows") \
            == [(300 - 120,)]  # 64MB / 512 KiB = 122 columns: loss, acc and 120 keys
        reason = query(mon, "SELECT reason FROM ingest_errors")[0][0]
        assert "max_metric_columns=122" in reason and "--memory-limit" in reason


def test_a_line_that_cannot_fit_says_raise_the_memory_limit(tmp_path):
    logs = tmp_path / "logs"
    _write(logs / "wide" / "metrics.jsonl", [_wide(1, 400)])
    with ingest(logs, max_metric_columns=400) as mon:
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(1,)]
    _write(logs / "new" / "metrics.jsonl", [{"step": s, "loss": 1.0} for s in range(5)])
    with ingest(logs, memory_limit="8MB") as mon:  # too small for one row of 400 columns
        deadline = time.monotonic() + 15
        while "--memory-limit" not in (mon.tailer.failure or "") \
                and time.monotonic() < deadline:
            time.sleep(0.1)
            mon.tailer.tick()
        failure = mon.tailer.failure
        assert failure.startswith("ingest of new/metrics.jsonl failing for ")
        assert "OutOfMemoryException" in failure and "raise --memory-limit" in failure
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]  # nothing skipped
    with ingest(logs) as mon:  # with memory enough, every line arrives
        assert query(mon, "SELECT count(*) FROM metrics_all WHERE run = 'new'") == [(5,)]


def test_out_of_memory_is_retried_with_smaller_batches_until_it_fits(tmp_path):
    # a 20,000-line batch into a 200-column table does not fit in 64MB; smaller ones do
    logs = tmp_path / "logs"
    _write(logs / "wide" / "metrics.jsonl", [_wide(1, 200) | {"loss": 1.0, "acc": 0.1}])
    ingest(logs).close()
    _write(logs / "new" / "metrics.jsonl",
           [{"step": s, "loss": 1.0, "acc": 0.1} for s in range(20_000)])
    with ingest(logs, memory_limit="64MB") as mon:
        assert mon.tailer.failure and mon.tailer.failure.endswith("retrying with a smaller batch")
        deadline = time.monotonic() + 20
        while (mon.tailer.failure or mon.tailer.behind) and time.monotonic() < deadline:
            time.sleep(0.05)
            mon.tailer.tick()
        assert mon.tailer.failure is None
        assert query(mon, "SELECT count(*), count(DISTINCT step) FROM metrics_all "
                     "WHERE run = 'new'") == [(20_000, 20_000)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_an_invalidated_database_is_said_once(tmp_path, caplog):
    # measured: these lines into a 150-column table at 48MB make DuckDB's checkpoint at
    # COMMIT run out of memory, which invalidates the database (FatalException)
    logs = tmp_path / "logs"
    _write(logs / "wide" / "metrics.jsonl", [_wide(1, 150) | {"loss": 1.0}])
    ingest(logs).close()
    _write(logs / "new" / "metrics.jsonl", [{"step": s, "loss": 1.0} for s in range(20_000)])
    with ingest(logs, memory_limit="48MB") as mon:
        deadline = time.monotonic() + 15
        while (mon.tailer.failure or mon.tailer.behind) and time.monotonic() < deadline \
                and "restart" not in (mon.tailer.failure or ""):
            time.sleep(0.05)
            mon.tailer.tick()
        if mon.tailer.failure is None:
            pytest.skip("DuckDB's checkpoint fitted this time: nothing was invalidated")
        failure = mon.tailer.failure  # what `ingest --once` prints (the server reopens)
        assert failure.startswith("ingest failing: the database was invalidated (Fatal")
        assert failure.endswith("`ingest --once` must be run again (lines not stored yet are "
                                "read then)")
        for _ in range(3):
            assert mon.tailer.tick() == 0
        assert mon.tailer.catch_up() == 0  # returns (`ingest --once` looped for ever)
        stopped = [r for r in caplog.records if "ingest stopped" in r.getMessage()]
        assert len(stopped) == 1 and "opens the database again" in stopped[0].getMessage()


def test_a_tick_far_longer_than_expected_shows_as_stuck(tmp_path):
    logs = tmp_path / "logs"
    _write(logs / "r" / "metrics.jsonl", [{"step": s, "loss": 1.0} for s in range(5)])
    with ingest(logs) as mon:
        _write(logs / "r" / "metrics.jsonl",
               [{"step": s, "loss": 1.0} for s in range(5, 60_005)])
        worker = IngestWorker(mon.tailer, mon.tailer.settings)
        worker.stuck_after_s = 0.0  # the real threshold is 30 s: any tick under way is "stuck"
        seen: list[str | None] = []
        tick = threading.Thread(target=worker._tick, args=(False,))
        tick.start()
        while tick.is_alive():
            seen.append(worker.failure)
            time.sleep(0.01)
        stuck = [s for s in seen if s]
        assert stuck and stuck[-1].startswith("ingest failing: stuck for ")
        assert stuck[-1].endswith(" s in one tick (a file or the database does not answer); "
                                  "restart the server if it stays")
        assert worker.failure is None  # the tick ended
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(60_005,)]


def test_a_failure_says_once_how_it_is_retried_and_a_one_shot_run_leaves_it_out():
    # health read "...; retrying with a smaller batch; retrying" beside a refused sort
    backoff = Backoff()
    error = duckdb.OutOfMemoryException("failed to offload data block")
    backoff.failed("r/metrics.jsonl", error, retry="retrying with a smaller batch", soon=True)
    said = backoff.summary()
    assert said.endswith(": OutOfMemoryException: failed to offload data block; retrying with "
                         "a smaller batch") and said.count("retrying") == 1
    assert backoff.summary(then=False).endswith("failed to offload data block")
    backoff.failed("r/metrics.jsonl", error, note="raise --memory-limit")
    assert backoff.summary().endswith("data block; raise --memory-limit; retrying")
