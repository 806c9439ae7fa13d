"""One tick's careful-path lines of many files share one transaction (issue 23): a catch-up's
events logs, and the appends of live runs. DuckDB's ``current_localtimestamp()`` is the time
its transaction began, so the files rows one transaction stored carry one ``updated_at``;
each file in a transaction of its own carried its own. What is stored is what one file per
transaction stored (the events, the runs' status, the offsets), and a file the database
refuses in a group keeps no other file's rows from being stored."""

from __future__ import annotations

import json
import time

from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import run_cli

RUNS = 12


def _lines(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))


def _fleet(logs, ended: bool = True) -> None:
    for i in range(RUNS):
        run = logs / f"team/run-{i:02d}"
        _lines(run / "metrics.jsonl", [{"step": s, "loss": 1.0 / (s + 1)} for s in range(5)])
        events = [{"event": "run_start", "step": 0}]
        if ended:
            events.append({"event": "run_end", "step": 4, "status": "completed"})
        _lines(run / "events.jsonl", events)


def _sql(logs, sql: str) -> list[dict]:
    out = run_cli("sql", sql, "--logdir", str(logs), "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_ingest_once_stores_a_catch_ups_events_logs_in_one_transaction(tmp_path):
    logs = tmp_path / "logs"
    _fleet(logs)
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0, done.stderr
    files = _sql(logs, "SELECT count(*) AS n, count(DISTINCT updated_at) AS commits, "
                 "sum(\"offset\" = size)::INT AS whole FROM files WHERE kind = 'events'")
    assert files == [{"n": RUNS, "commits": 1, "whole": RUNS}]
    stored = _sql(logs, "SELECT count(*) AS events, count(DISTINCT run) AS runs FROM events")
    assert stored == [{"events": 2 * RUNS, "runs": RUNS}]
    status = _sql(logs, "SELECT status, count(*) AS n FROM runs GROUP BY status")
    assert status == [{"status": "completed", "n": RUNS}]


def test_one_ticks_appends_of_many_files_share_one_transaction(tmp_path):
    logs = tmp_path / "logs"
    _fleet(logs, ended=False)
    with ingest(logs) as mon:
        for i in range(RUNS):
            _lines(logs / f"team/run-{i:02d}/metrics.jsonl",
                   [{"step": s, "loss": 0.1} for s in range(5, 8)])
        assert mon.tailer.tick() == 3 * RUNS
        assert query(mon, "SELECT count(*), count(DISTINCT updated_at), min(lines) FROM files "
                     "WHERE kind = 'metrics'") == [(RUNS, 1, 8)]
        assert query(mon, "SELECT count(*), max(step) FROM metrics_all") == [(8 * RUNS, 7)]
        assert query(mon, "SELECT count(DISTINCT last_seen) FROM runs") == [(1,)]
        assert mon.tailer.failure is None


def test_a_file_refused_in_a_group_keeps_no_other_files_rows_out(tmp_path):
    # another transaction holds one file's row: the group's transaction fails for a reason
    # that is no line's, and each file is then stored alone, that one retried with backoff
    logs = tmp_path / "logs"
    _fleet(logs, ended=False)
    with ingest(logs) as mon:
        blocker = mon.db.con.cursor()
        blocker.execute("BEGIN TRANSACTION")
        blocker.execute("UPDATE files SET updated_at = NULL "
                        "WHERE path = 'team/run-03/metrics.jsonl'")
        for i in range(RUNS):
            _lines(logs / f"team/run-{i:02d}/metrics.jsonl",
                   [{"step": s, "loss": 0.1} for s in range(5, 8)])
        mon.tailer.tick()
        assert query(mon, "SELECT run, count(*) FROM metrics_all WHERE step >= 5 GROUP BY run "
                     "ORDER BY run") == [(f"team/run-{i:02d}", 3) for i in range(RUNS) if i != 3]
        assert mon.tailer.failure.startswith("ingest of team/run-03/metrics.jsonl failing")
        blocker.execute("ROLLBACK")
        time.sleep(0.6)  # its backoff
        mon.tailer.tick()
        assert mon.tailer.failure is None
        assert query(mon, "SELECT count(*), count(DISTINCT (run, step)) FROM metrics_all") \
            == [(8 * RUNS, 8 * RUNS)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]
