"""The real server as a subprocess: /api/health, /api/runs, read-only /api/sql, and the CLI
talking to it over HTTP while it holds the database."""

from __future__ import annotations

import json
import shutil
import time

import httpx
import pytest

from tests.conftest import SAMPLES, Server, run_cli, wait_for

SEED_LINES = 2230


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("api") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logdir / "seed-cliff")
    srv = Server(logdir, "--sql-time-limit", "1", "--sql-max-rows", "50")
    srv.logdir = logdir
    yield srv
    srv.stop()


def test_health_after_startup_catch_up(server):
    # the lifespan ingests before serving: the first answer already has every line
    health = httpx.get(server.url + "/api/health").json()
    assert health["runs"] == 1 and health["rows"] == SEED_LINES and health["errors"] == 0
    assert health["files"] == 3 and health["ingest_lag_s"] < 5


def test_health_names_the_files_it_does_not_read_and_why(server):
    notes = server.logdir / "seed-cliff" / "notes.jsonl"
    notes.write_text('{"comment": "lr sweep, second try"}\n')
    try:
        def skipped():
            health = httpx.get(server.url + "/api/health").json()
            return health["skipped"] if health["skipped_files"] else None
        (entry,) = wait_for(skipped, timeout=20)
        assert entry["file"] == "seed-cliff/notes.jsonl" and "metrics.jsonl" in entry["reason"]
    finally:
        notes.unlink()


def test_runs(server):
    runs = httpx.get(server.url + "/api/runs").json()["runs"]
    assert [(r["run"], r["status"], r["last_step"]) for r in runs] == [
        ("seed-cliff", "completed", 4499)]


def test_sql_returns_rows_and_says_when_truncated(server):
    body = server.sql("SELECT step, loss FROM metrics WHERE step = 2029").json()
    assert body["columns"] == ["step", "loss"] and body["rows"] == [[2029, 13.0]]
    body = server.sql("SELECT step FROM metrics ORDER BY step").json()
    assert body["row_count"] == 50 and body["truncated"] is True


FORBIDDEN = [
    ("DROP TABLE runs", "not DROP"),
    ("INSERT INTO runs (run) VALUES ('x')", "not INSERT"),
    ("WITH x AS (DELETE FROM runs RETURNING *) SELECT * FROM x", "tries to write"),
    ("COPY runs TO 'out.csv'", "not COPY"),
    ("ATTACH 'other.duckdb' AS other", "not ATTACH"),
    ("INSTALL httpfs", "not LOAD"),
    ("LOAD httpfs", "not LOAD"),
    ("PRAGMA version", "not PRAGMA"),
    ("SET threads = 1", "not SET"),
    ("EXPORT DATABASE 'dump'", "not EXPORT"),
    ("SELECT * FROM read_text('/etc/passwd')", "never files"),
    ("SELECT * FROM read_csv('/etc/passwd')", "never files"),
]


@pytest.mark.parametrize(("sql", "says"), FORBIDDEN, ids=[f[0].split()[0] + str(i)
                                                          for i, f in enumerate(FORBIDDEN)])
def test_sql_refuses_anything_but_reading(server, sql, says):
    response = server.sql(sql)
    assert response.status_code == 403
    assert says in response.json()["error"]
    assert server.sql("SELECT count(*) FROM runs").json()["rows"] == [[1]]


def test_slow_query_is_interrupted(server):
    started = time.monotonic()
    response = server.sql("SELECT count(*) FROM range(100000000) a, range(100000000) b")
    assert response.status_code == 408
    assert "exceeded 1 s" in response.json()["error"]
    assert time.monotonic() - started < 30
    assert server.sql("SELECT 1").json()["rows"] == [[1]]  # the cursor is usable afterwards


def test_bad_requests_get_messages_not_tracebacks(server):
    assert server.sql("SELEC 1").json()["error"].startswith("SQL syntax error")
    response = httpx.post(server.url + "/api/sql", content=b'{"query": 1}')
    assert response.status_code == 400 and "send" in response.json()["error"]
    response = server.sql("SELECT * FROM no_such_table")
    assert response.status_code == 400 and "no_such_table" in response.json()["error"]


def test_cli_sql_goes_through_the_running_server(server):
    done = run_cli("sql", "SELECT step, loss FROM metrics WHERE step IN (2000, 2029) ORDER BY "
                   "step", "--logdir", str(server.logdir), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"step": 2000, "loss": 0.735},
                                       {"step": 2029, "loss": 13.0}]
    refused = run_cli("sql", "DROP TABLE runs", "--logdir", str(server.logdir))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_lines_appended_while_serving_are_queryable(server):
    path = server.logdir / "seed-cliff" / "metrics.jsonl"
    with path.open("a") as handle:
        handle.write(json.dumps({"step": 4502, "loss": 0.5, "late_metric": 1.5}) + "\n")
    wait_for(lambda: server.sql("SELECT late_metric FROM metrics WHERE step = 4502")
             .json().get("rows") == [[1.5]], timeout=10)


def test_named_queries_over_http(server):
    body = httpx.get(server.url + "/api/query/stalls", params={"run": "seed-cliff"}).json()
    assert [r[3] for r in body["rows"]] == [2027, 4019]  # the step column
    body = httpx.get(server.url + "/api/query/stalls",
                     params={"run": "seed-cliff", "min_ratio": "12"}).json()
    assert [r[3] for r in body["rows"]] == [2027]
    missing = httpx.get(server.url + "/api/query/spikes", params={"run": "seed-cliff"})
    assert missing.status_code == 400 and "metric" in missing.json()["error"]
    unknown = httpx.get(server.url + "/api/query/nope")
    assert unknown.status_code == 404 and "known queries" in unknown.json()["error"]


def test_live_incidents_over_http_and_cli(server):
    def incidents():
        return httpx.get(server.url + "/api/incidents", params={"run": "seed-cliff"}).json()[
            "incidents"]

    found = wait_for(lambda: len(incidents()) == 5 and incidents(), timeout=20)
    assert sorted(i["step"] for i in found) == [2027, 2029, 4019, 4021, 4231]
    done = run_cli("diagnose", str(server.logdir / "seed-cliff"), "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(i["step"] for i in json.loads(done.stdout)) == [2027, 2029, 4019, 4021, 4231]
    named = run_cli("sql", "--query", "checkpoints", "--param", "run=seed-cliff", "--logdir",
                    str(server.logdir), "--format", "json")
    rows = json.loads(named.stdout)
    assert [(r["step"], r["gap_to_step"], r["blocked_s"]) for r in rows] == [
        (2000, 2027, 155.2), (4001, 4019, 100.0)]


def test_incidents_found_live_while_lines_arrive_match_whole_run(tmp_path, make_server):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    srv = make_server(logdir)
    done = run_cli("replay", str(SAMPLES / "seed-cliff"), "--to", str(logdir / "live"),
                   "--speed", "3000")
    assert done.returncode == 0, done.stderr
    live = wait_for(lambda: (httpx.get(srv.url + "/api/incidents").json()["incidents"]
                             if len(httpx.get(srv.url + "/api/incidents").json()["incidents"])
                             >= 5 else None), timeout=30)
    time.sleep(2.5)  # a last look by the live worker after the final lines
    live = httpx.get(srv.url + "/api/incidents").json()["incidents"]
    copy = tmp_path / "copy" / "live"
    shutil.copytree(logdir / "live", copy)
    whole = json.loads(run_cli("diagnose", str(copy), "--json").stdout)
    key = ("kind", "metric", "step", "end_step", "causes", "evidence")
    assert sorted(tuple(map(str, (i[k] for k in key))) for i in live) == sorted(
        tuple(map(str, (i[k] for k in key))) for i in whole)


@pytest.mark.parametrize("body", [{"sql": 5}, {"sql": "SELECT 1", "max_rows": -2},
                                  {"sql": "SELECT 1", "max_rows": "abc"}])
def test_malformed_sql_requests_are_400_not_500(server, body):
    response = httpx.post(server.url + "/api/sql", json=body)
    assert response.status_code == 400 and "max_rows" in response.json()["error"]
