"""One name for the seconds between two lines (issue 20, item 16): ``gap_s`` in incidents,
alert states and rules files, as on the Run page, also for a database stored before."""

from __future__ import annotations

import json
import shutil

import duckdb
import httpx
import numpy as np
import pandas as pd

from app.alerts.rules import parse_rules
from app.db import queries
from app.diagnose.detect import CLOCK, RunDetector, Watch
from app.monitor import default_db
from tests.conftest import SAMPLES, wait_for


def old_database(logdir) -> None:
    """The database a monitor from before migration 0024 left: a stall stored as interval_s,
    the incident rule's state keyed on it, a transition and a notification."""
    path = default_db(logdir)
    path.parent.mkdir(parents=True)
    con = duckdb.connect(str(path))
    queries.execute(con, "db/migrations_table")
    for name, sql in queries.migrations():
        if name >= "0024":
            break
        con.execute(sql)
        queries.execute(con, "db/migration_record", {"name": name})
    key, summary = "stall:interval_s@2027", "stall at step 2027: gap 167.2 s in interval_s"
    detail = json.dumps({"facts": {"metric": "interval_s", "summary": summary}})
    con.execute("INSERT INTO incidents (run, kind, metric, step, end_step, value, baseline, "
                "worst_step) VALUES ('seed', 'stall', 'interval_s', 2027, 2027, 167.2, 10.0, "
                "2027)")
    con.execute("INSERT INTO alert_states (rule, run, metric, state, episode, changed_time, "
                "changed_step, detail) VALUES ('incident', 'seed', ?, 'firing', 1, 1.0, 2027, ?)",
                [key, detail])
    con.execute("INSERT INTO alert_transitions (rule, run, metric, from_state, to_state, time) "
                "VALUES ('incident', 'seed', ?, 'pending', 'firing', 1.0)", [key])
    con.execute("INSERT INTO notifications (key, rule, run, metric, kind, severity, "
                "created_time, facts) VALUES ('k1', 'incident', 'seed', ?, 'firing', "
                "'warning', 1.0, ?)", [key, detail])
    con.close()


def test_a_stall_is_found_as_gap_s():
    n = 40
    clock = np.arange(n) * 1.0
    clock[30:] += 60.0  # one minute without a line before step 30
    frame = pd.DataFrame({"line_id": np.arange(n), "step": np.arange(n),
                          "attempt": np.ones(n, dtype=np.int64), CLOCK: clock,
                          "loss": np.full(n, 1.0)})
    found = RunDetector("r", Watch()).feed(frame)
    assert [(i.kind, i.metric, i.step) for i in found] == [("stall", "gap_s", 30)]


def test_an_old_database_shows_gap_s_and_stores_no_stall_twice(tmp_path, make_server):
    """The server opens a database stored before: /api/incidents and the Alerts page's states
    say gap_s, and live diagnosis of the same log updates the stall instead of adding one."""
    logdir = tmp_path / "logs"
    old_database(logdir)
    shutil.copytree(SAMPLES / "seed-cliff", logdir / "seed")
    server = make_server(logdir)

    def incidents():
        body = httpx.get(server.url + "/api/incidents?run=seed", timeout=30).json()
        found = body["incidents"]
        return found if any(i["kind"] == "cliff" for i in found) else None  # diagnosis done

    stalls = [(i["metric"], i["step"]) for i in wait_for(incidents, 60) if i["kind"] == "stall"]
    assert ("gap_s", 2027) in stalls and stalls.count(("gap_s", 2027)) == 1
    assert all(metric == "gap_s" for metric, _ in stalls)
    alerts = httpx.get(server.url + "/api/alerts", timeout=30).json()
    metrics = {s["metric"] for s in alerts["states"] if s["rule"] == "incident"}
    assert "stall:gap_s@2027" in metrics and not any("interval_s" in m for m in metrics)
    assert "interval_s" not in json.dumps(alerts)


def test_a_rules_file_naming_interval_s_means_gap_s():
    """Old rules files say interval_s: read as gap_s, with no problem reported."""
    text = ('[[rule]]\nname = "slow"\ntype = "threshold"\nmetric = "interval_s"\n'
            'op = ">"\nvalue = 60\n\n'
            '[[rule]]\nname = "nan"\ntype = "nonfinite"\nmetrics = ["loss", "interval_s"]\n')
    rules, problems = parse_rules(text)
    assert problems == []
    assert rules[0].metric == "gap_s" and rules[1].metrics == ("loss", "gap_s")
