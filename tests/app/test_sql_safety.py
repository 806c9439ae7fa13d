"""Ad-hoc SQL stays read-only and bounded, through the real server, the real CLI and real files
(issue 7, section 1).

Every statement that is not a plain read is refused as sent, under EXPLAIN and under EXPLAIN
ANALYZE (which runs the statement inside it), and afterwards the log files are byte-identical,
no file has appeared under the log directory, the database holds the same tables and rows and
the server's settings are unchanged.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import httpx
import pytest

from app.db import queries
from app.db.database import Database
from app.db.functions import (
    FILE_FUNCTIONS,
    LEFT_OUT,
    PATH_FUNCTIONS,
    REFUSED_FUNCTIONS,
    SHOWN_SETTINGS,
    TABLE_FUNCTIONS,
    TABLE_NAME_FUNCTIONS,
    check_functions,
)
from app.db.readonly import check_plan, run_readonly
from app.db.statement import read_statement
from app.errors import CliffwatchError
from tests.app.test_ingest_bad_input import ingest
from tests.conftest import Server, run_cli

LINES = 1000
TIME_LIMIT = 4  # seconds, the module server's --sql-time-limit
MAX_BYTES = 1_000_000  # the module server's --sql-max-bytes

# LOGDIR stands for the log directory of the server or CLI under test
REFUSED = [
    "COPY (SELECT 1 AS x) TO 'LOGDIR/r/metrics.jsonl' (FORMAT csv, HEADER false)",
    "COPY (SELECT 1 AS x) TO 'LOGDIR/.cliffwatch/cliffwatch.duckdb' (FORMAT csv)",
    "COPY (SELECT 'http://evil.example' AS url) TO 'LOGDIR/.cliffwatch/server.json' "
    "(FORMAT json)",
    "COPY (SELECT 'fake' AS run, 1 AS step) TO 'LOGDIR/fake' (FORMAT json, PARTITION_BY (run), "
    "OVERWRITE_OR_IGNORE)",
    "COPY runs TO 'LOGDIR/pwn.csv'",
    "COPY runs FROM 'LOGDIR/r/metrics.jsonl'",
    "EXPORT DATABASE 'LOGDIR/dump'",
    "IMPORT DATABASE 'LOGDIR/dump'",
    "ATTACH 'LOGDIR/other.duckdb' AS other",
    "SET memory_limit = '4MB'",
    "SET threads = 1",
    "SET lock_configuration = false",
    "SET enable_external_access = true",
    "SET allowed_directories = ['/']",
    "SET search_path = 'system.main'",
    "SET VARIABLE x = 1",
    "RESET memory_limit",
    "PRAGMA memory_limit = '4MB'",
    "PRAGMA threads = 1",
    "INSERT INTO runs (run) VALUES ('x')",
    "UPDATE runs SET status = 'x'",
    "DELETE FROM metric_rows",
    "DROP TABLE runs",
    "CREATE TABLE pwn AS SELECT 1 AS x",
    "ALTER TABLE runs ADD COLUMN pwn INTEGER",
    "CHECKPOINT",
    "VACUUM",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CALL pragma_version()",
    "WITH x AS (DELETE FROM runs RETURNING *) SELECT * FROM x",
    "SELECT * FROM read_text('/etc/passwd')",
]
FORMS = {
    "plain": "{}",
    "explain": "EXPLAIN {}",
    "analyze": "EXPLAIN ANALYZE {}",
    "spelled": "  /* x */ explain -- y\n (Analyze) {}",
}
# the statements that did damage before issue 7
DANGEROUS = [*REFUSED[:5], "EXPORT DATABASE 'LOGDIR/dump'", "SET memory_limit = '4MB'"]
CASES = [(form, sql) for sql in REFUSED for form in FORMS
         if form != "spelled" or sql in DANGEROUS]

STATE = ("SELECT (SELECT count(*) FROM metric_rows) AS lines, "
         "(SELECT count(*) FROM runs) AS runs, "
         "(SELECT string_agg(database_name || '.' || table_name, ',' "
         "        ORDER BY database_name, table_name) FROM duckdb_tables()) AS tables, "
         "(SELECT string_agg(DISTINCT database_name, ',' ORDER BY database_name) "
         " FROM duckdb_schemas()) AS dbs, "
         "current_setting('memory_limit') AS memory_limit, current_setting('threads') AS threads, "
         "current_setting('enable_external_access') AS external, "
         "current_setting('lock_configuration') AS locked, "
         "current_setting('search_path') AS search_path, "
         "(SELECT string_agg(sequence_name || '=' || coalesce(last_value::VARCHAR, '-'), ',' "
         "        ORDER BY sequence_name) FROM duckdb_sequences()) AS sequences, "
         "(SELECT count(*) FROM duckdb_external_resource_types()) AS resource_types, "
         "(SELECT count(*) FROM files) AS files, "
         "(SELECT string_agg(status, ',' ORDER BY run) FROM runs) AS statuses")


def write_run(logdir: Path) -> None:
    run = logdir / "r"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": i, "loss": 1 / (i + 1)}) + "\n" for i in range(LINES)))


def files(logdir: Path, *, with_db: bool) -> dict[str, bytes | None]:
    """Every path under the log directory with its bytes. DuckDB's write-ahead log and spill
    folder come and go with ingest; the database file's bytes count only when no server runs
    (a server may checkpoint at any time)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(logdir.rglob("*")):
        rel = path.relative_to(logdir).as_posix()
        if rel.endswith(".wal") or ".tmp" in rel:
            continue
        keep = path.is_file() and (with_db or not rel.endswith(".duckdb"))
        found[rel] = path.read_bytes() if keep else None
    return found


def refused_text(sql: str, logdir: Path, form: str = "plain") -> str:
    return FORMS[form].format(sql.replace("LOGDIR", str(logdir)))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("safety") / "logs"
    write_run(logdir)
    srv = Server(logdir, "--sql-time-limit", str(TIME_LIMIT), "--sql-max-bytes", str(MAX_BYTES))
    srv.logdir = logdir
    client = httpx.Client(base_url=srv.url, timeout=60)
    srv.sql = lambda text: client.post("/api/sql", json={"sql": text})
    srv.state = lambda: srv.sql(STATE).json()["rows"]
    yield srv
    client.close()
    srv.stop()


@pytest.fixture(scope="module")
def local_logs(tmp_path_factory):
    """A log directory ingested once, queried by the CLI with no server running."""
    logdir = tmp_path_factory.mktemp("local") / "logs"
    write_run(logdir)
    done = run_cli("ingest", "--logdir", str(logdir), "--once")
    assert done.returncode == 0, done.stderr
    return logdir


def test_server_state_is_what_start_up_left(server):
    [[rows, runs, _tables, dbs, _memory, _threads, external, locked, _path, *_]] = server.state()
    assert (rows, runs, external, locked) == (LINES, 1, False, True)
    assert "other" not in dbs


@pytest.mark.parametrize(("form", "sql"), CASES, ids=[f"{f}-{s[:40]}" for f, s in CASES])
def test_api_sql_refuses_and_changes_nothing(server, form, sql):
    before_files, before_state = files(server.logdir, with_db=False), server.state()
    response = server.sql(refused_text(sql, server.logdir, form))
    error = response.json()["error"]
    if form == "plain" or not error.startswith("SQL syntax error"):
        assert response.status_code == 403, error
    else:  # EXPLAIN EXPORT and the like do not parse at all
        assert response.status_code == 400
    assert files(server.logdir, with_db=False) == before_files
    assert server.state() == before_state


@pytest.mark.parametrize("sql", DANGEROUS)
def test_api_query_parameters_cannot_carry_a_statement(server, sql):
    before_files, before_state = files(server.logdir, with_db=False), server.state()
    text = refused_text(sql, server.logdir, "analyze")
    for value in (text, f"x'); {text}; --"):
        response = httpx.get(server.url + "/api/query/stalls", params={"run": value})
        # the text is a run name like any other: bound, matched by no run, so the answer is
        # the 404 naming the runs that exist (issue 20 item 13), never the statement's effect
        assert response.status_code == 404 and "no run named" in response.json()["error"]
    assert files(server.logdir, with_db=False) == before_files
    assert server.state() == before_state


@pytest.mark.parametrize("name", ["db%2Flock_configuration", "db%2Fallow_dirs",
                                  "ingest%2Frun_status", "..%2Fqueries%2Fdb%2Frollback"])
def test_api_query_runs_no_internal_statement(server, name):
    before_state = server.state()
    response = httpx.get(f"{server.url}/api/query/{name}")
    # no route matches a name with a slash (Streamlit answers with its page) or named()
    # refuses it; either way no internal statement runs
    page = response.headers.get("content-type", "").startswith("text/html")
    assert response.status_code in (400, 404) or page
    assert server.state() == before_state


def test_every_named_query_is_a_plain_read():
    for name in queries.names():
        text = queries.load(name).text()
        assert read_statement(text).run == text


@pytest.mark.parametrize("sql", [
    "explain analyse copy (select 1) to 'x.csv'",
    "EXPLAIN (ANALYZE true) COPY (SELECT 1) TO 'x.csv'",
    "EXPLAIN (FORMAT json, ANALYZE) COPY (SELECT 1) TO 'x.csv'",
    "EXPLAIN\n\tANALYZE\n\tSET threads = 1",
    "-- x\nEXPLAIN ANALYZE /* y */ SET memory_limit = '4MB'",
    "EXPLAIN (ANALYZE) SET lock_configuration = false",
    "EXPLAIN (ANALYZE, FORMAT json) PRAGMA threads = 1",
    "EXPLAIN ANALYZE SELECT 1; SET threads = 1",
    "EXPLAIN ANALYZE (SELECT 1); COPY (SELECT 1) TO 'x.csv'",
    "EXPLAIN ANALYZE INSERT INTO t SELECT 1",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE PIVOT (SELECT 1 AS a, 2 AS b) ON a USING sum(b)",
    "EXPLAIN (ANALYZE, COPY) SELECT 1",
    'EXPLAIN "ANALYZE" SELECT 1',
])
def test_explain_is_taken_apart_by_the_parser(sql):
    with pytest.raises(CliffwatchError):
        read_statement(sql)


@pytest.mark.parametrize(("sql", "run"), [
    ("explain analyze select 1", "EXPLAIN ANALYZE select 1"),
    ("/* c */ explain -- x\n (analyze) select 1", "EXPLAIN (ANALYZE) select 1"),
    ("EXPLAIN (FORMAT json, ANALYZE) FROM t", "EXPLAIN (ANALYZE, FORMAT json) FROM t"),
    ("EXPLAIN (ANALYZE false) SELECT 1", "EXPLAIN SELECT 1"),
    ("EXPLAIN (SELECT 1)", "EXPLAIN (SELECT 1)"),
    ("  SELECT 1", "  SELECT 1"),
])
def test_explain_of_a_read_is_rebuilt_from_the_read(sql, run):
    assert read_statement(sql).run == run


@pytest.mark.parametrize("sql", ["EXPLAIN SELECT step FROM metrics",
                                 "EXPLAIN ANALYZE SELECT step FROM metrics",
                                 "explain (analyze, format json) select 1",
                                 "/* c */ EXPLAIN ANALYZE (SELECT count(*) FROM metrics)"])
def test_explain_of_a_read_still_works(server, sql):
    response = server.sql(sql)
    assert response.status_code == 200, response.text
    assert response.json()["row_count"] == 1


CLI_CASES = [("analyze", sql) for sql in DANGEROUS] + [("plain", sql) for sql in DANGEROUS[:2]]


@pytest.mark.parametrize(("form", "sql"), CLI_CASES)
def test_cli_without_server_refuses_and_changes_nothing(local_logs, form, sql):
    before = files(local_logs, with_db=True)
    done = run_cli("sql", refused_text(sql, local_logs, form), "--logdir", str(local_logs))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "only read queries" in done.stderr or "syntax error" in done.stderr
    assert files(local_logs, with_db=True) == before


def test_cli_through_server_refuses_and_changes_nothing(server):
    before_files, before_state = files(server.logdir, with_db=False), server.state()
    for sql in DANGEROUS[:3]:
        done = run_cli("sql", refused_text(sql, server.logdir, "analyze"), "--logdir",
                       str(server.logdir))
        assert done.returncode == 2 and "only read queries" in done.stderr, done.stderr
    assert files(server.logdir, with_db=False) == before_files
    assert server.state() == before_state


def test_configuration_is_locked_after_start_up(tmp_path):
    """The second lock: even a SET that reached DuckDB would change nothing."""
    write_run(tmp_path / "logs")
    writer = Database(tmp_path / "db.duckdb", allowed_dirs=[tmp_path / "logs"])
    for statement in ("SET memory_limit = '4MB'", "SET threads = 1",
                      "SET lock_configuration = false", "SET enable_external_access = true"):
        with pytest.raises(Exception, match="configuration has been locked"):
            writer.cursor().execute(statement)
    writer.close()
    reader = Database(tmp_path / "db.duckdb", read_only=True)  # the CLI's own copy
    with pytest.raises(Exception, match="configuration has been locked"):
        reader.cursor().execute("SET memory_limit = '4MB'")
    reader.close()


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1 AS x) TO 'LOGDIR/r/metrics.jsonl' (FORMAT csv, HEADER false)",
    "COPY (SELECT 'fake' AS run, 1 AS step) TO 'LOGDIR/r' (FORMAT json, PARTITION_BY (run), "
    "OVERWRITE_OR_IGNORE)",
    "INSERT INTO t VALUES (2)",
    "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
    "SET VARIABLE x = 1",
    "CREATE TABLE u AS SELECT 1 AS x",
    "SELECT * FROM checkpoint()",
])
def test_plan_check_holds_if_the_parser_check_were_fooled(tmp_path, sql):
    """The second check, called with what the first would have refused: DuckDB's plan shows
    the write, and planning it changed nothing."""
    write_run(tmp_path / "logs")
    db = Database(tmp_path / "db.duckdb", allowed_dirs=[tmp_path / "logs"])
    db.cursor().execute("CREATE TABLE t AS SELECT 1 AS x")
    before = files(tmp_path / "logs", with_db=True)
    with pytest.raises(CliffwatchError, match="would run") as refused:
        check_plan(db.cursor(), sql.replace("LOGDIR", str(tmp_path / "logs")))
    assert refused.value.status == 403
    assert files(tmp_path / "logs", with_db=True) == before
    assert db.cursor().execute("SELECT count(*) FROM t").fetchall() == [(1,)]
    check_plan(db.cursor(), "SELECT * FROM t, range(3) UNION SELECT 1, 2")  # a read passes
    db.close()


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1 AS x) TO 'LOGDIR/r/metrics.jsonl' (FORMAT csv, HEADER false)",
    "COPY (SELECT 1 AS x) TO 'LOGDIR/.cliffwatch/server.json' (FORMAT csv)",
    "COPY (SELECT 1 AS x) TO 'LOGDIR/fake' (FORMAT csv, PARTITION_BY (x))",
    "SELECT * FROM read_text('LOGDIR/r/metrics.jsonl')",
])
def test_database_itself_refuses_the_log_directory(tmp_path, sql):
    """The last lock, with every check of ours skipped (the statement goes straight to the
    server's own connection): DuckDB may touch only ingest's scratch space, so neither a log
    nor the database folder can be written, or even read, by any statement."""
    logs = tmp_path / "logs"
    write_run(logs)
    with ingest(logs) as monitor:
        before = files(logs, with_db=False)
        with pytest.raises(duckdb.PermissionException):
            monitor.db.cursor().execute(sql.replace("LOGDIR", str(logs)))
        assert files(logs, with_db=False) == before
        stored = monitor.db.cursor().execute("SELECT count(*) FROM metrics").fetchall()
        assert stored == [(LINES,)]


def test_failed_begin_refuses_the_query(tmp_path):
    """On a cursor left inside a read-write transaction, BEGIN READ ONLY fails; the query
    must not run in that transaction."""
    db = Database(tmp_path / "db.duckdb")
    cursor = db.cursor()
    cursor.execute("CREATE TABLE t AS SELECT 1 AS x")
    cursor.begin()
    cursor.execute("INSERT INTO t VALUES (2)")
    with pytest.raises(CliffwatchError, match="read-only transaction") as refused:
        run_readonly(cursor, "WITH d AS (DELETE FROM t RETURNING *) SELECT count(*) FROM d",
                     max_rows=10, time_limit=10)
    assert refused.value.status == 503
    # the cursor starts clean again, and the write never happened
    assert run_readonly(cursor, "SELECT count(*) FROM t", max_rows=10,
                        time_limit=10).rows == [(1,)]
    db.close()


def test_result_is_capped_in_bytes(server):
    response = server.sql("SELECT repeat('x', 100000) AS s FROM range(1000)")
    body = response.json()
    assert response.status_code == 200 and body["truncated"] is True
    assert "bytes" in body["truncated_reason"] and "--sql-max-bytes" in body["truncated_reason"]
    assert body["row_count"] <= MAX_BYTES // 100000 and len(response.content) < 2 * MAX_BYTES


def test_result_is_capped_in_rows_with_the_reason(tmp_path):
    db = Database(tmp_path / "db.duckdb")
    result = run_readonly(db.cursor(), "SELECT * FROM range(100)", max_rows=10, time_limit=10)
    assert len(result.rows) == 10 and result.to_json()["truncated"] is True
    assert "--sql-max-rows" in result.to_json()["truncated_reason"]
    whole = run_readonly(db.cursor(), "SELECT * FROM range(10)", max_rows=10, time_limit=10)
    assert len(whole.rows) == 10 and whole.to_json()["truncated_reason"] is None
    db.close()


def test_request_body_is_capped(server):
    big = b"SELECT 1 -- " + b"x" * 3_000_000  # the default cap is 1 MiB
    response = httpx.post(server.url + "/api/sql", content=big, timeout=30)
    assert response.status_code == 413 and "--max-request-bytes" in response.json()["error"]
    # without a Content-Length (chunked), the body is counted as it arrives
    with socket_to(server) as sock:
        sock.sendall(b"POST /api/sql HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(17):  # just past the cap, so the server leaves nothing unread
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert sock.recv(100).startswith(b"HTTP/1.1 413")
    assert server.sql("SELECT 1").json()["rows"] == [[1]]


def socket_to(server):
    import socket

    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def test_health_answers_while_heavy_queries_wait(server):
    # long but small: one that holds memory is stopped at once by the memory guard instead
    heavy = "SELECT sum(hash(a.range + b.range)) FROM range(100000) a, range(100000) b"
    started = threading.Event()

    def post(_):
        started.set()
        return httpx.post(server.url + "/api/sql", json={"sql": heavy}, timeout=60).status_code

    with ThreadPoolExecutor(50) as pool:
        statuses = pool.map(post, range(50))
        started.wait()
        time.sleep(1.0)  # let all 50 arrive and queue
        begun = time.monotonic()
        health = httpx.get(server.url + "/api/health", timeout=60)
        waited = time.monotonic() - begun
        statuses = list(statuses)
    assert health.status_code == 200 and health.json()["rows"] == LINES
    assert waited < TIME_LIMIT / 2, f"/api/health waited {waited:.1f} s behind ad-hoc queries"
    assert set(statuses) <= {408, 503} and statuses.count(408) >= 2
    assert server.sql("SELECT 1").json()["rows"] == [[1]]


def test_health_says_whether_ingest_is_failing(server):
    health = httpx.get(server.url + "/api/health").json()
    assert health["ingest"] == "ok" and health["ingest_error"] is None
    assert health["alerts"] == "ok" and health["alerts_error"] is None  # rules and delivery


def test_metric_names_are_matched_exactly(tmp_path):
    """downsample, spikes, cliffs and run_summary select the named column, not a regex."""
    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(
        {"step": i, "loss": 2.0, "acc(top1)": 0.5, "a.b:c": 1.0}) + "\n" for i in range(50)))
    monitor = ingest(tmp_path / "logs")
    cursor = monitor.db.cursor()

    def rows(name, **params):
        query = queries.load(name)
        return run_readonly(cursor, query.text(), params=query.bind(params), max_rows=100,
                            time_limit=10).rows

    assert {v for _, v in rows("downsample", run="r", metric="acc(top1)", points=10)} == {0.5}
    assert {v for _, v in rows("downsample", run="r", metric="a.b:c", points=10)} == {1.0}
    assert rows("spikes", run="r", metric="acc(top1)") == []
    assert rows("cliffs", run="r", metric="acc(top1)") == []
    for name in ("downsample", "spikes", "cliffs"):
        with pytest.raises(CliffwatchError):
            rows(name, run="r", metric="oss")  # a part of "loss" is not a column
    [summary] = rows("run_summary", run="r", metric="loss")
    assert summary[7:9] == (2.0, 2.0)  # last_loss, best_loss
    with pytest.raises(CliffwatchError):
        rows("run_summary", run="r", metric="oss")
    monitor.close()


def test_timestamps_with_time_zones_are_returned(tmp_path):
    """now() and a TIMESTAMPTZ literal are TIMESTAMP WITH TIME ZONE, which DuckDB hands to
    Python through pytz."""
    db = Database(tmp_path / "db.duckdb", allowed_dirs=[tmp_path])
    [(now,)] = run_readonly(db.cursor(), "SELECT now()", max_rows=5, time_limit=10).rows
    assert now.year >= 2024
    [(noon,)] = run_readonly(db.cursor(), "SELECT TIMESTAMPTZ '2024-05-01 12:00:00+02'",
                             max_rows=5, time_limit=10).rows
    assert noon.year == 2024 and noon.utcoffset() is not None
    db.close()


def hidden(statement: str) -> str:
    """``statement`` run by json_execute_serialized_sql on a connection of its own (issue 7
    review, F1: it committed outside the read-only transaction and past the time limit)."""
    return ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql("
            f"'{statement.replace(chr(39), chr(39) * 2)}'))")


FUNCTION_ATTACKS = [
    hidden("WITH x AS (DELETE FROM metric_rows RETURNING 1) SELECT count(*) FROM x"),
    hidden("WITH x AS (UPDATE files SET size = 0 RETURNING 1) SELECT count(*) FROM x"),
    hidden("WITH x AS (INSERT INTO runs (run) VALUES ('pwn') RETURNING 1) SELECT * FROM x"),
    hidden("SELECT setval('file_ids', 2147483647)"),
    "SELECT setval('file_ids', 2147483647)",
    "SELECT nextval('file_ids')",
    "SELECT * FROM destroy_external_resource('checkpoint', 'cliffwatch')",
    "SELECT * FROM destroy_external_resource('query', 'SELECT setval(''file_ids'', 7)')",
    "SELECT * FROM register_external_resource_type('evil', kind := 'catalog', "
    "create_function := 'checkpoint', status_function := 'checkpoint', "
    "destroy_function := 'checkpoint', resolve_function := 'checkpoint', "
    "list_function := 'checkpoint')",
    "SELECT * FROM force_checkpoint()",
    "SELECT * FROM query('SELECT setval(''file_ids'', 7)')",
    # hidden deeper: a CTE, a lateral join, a lambda, a scalar subquery, another spelling
    "WITH a AS (SELECT * FROM range(2)) SELECT * FROM a, LATERAL (SELECT * FROM "
    "\"QUERY\"('SELECT nextval(''file_ids'')'))",
    "SELECT list_transform([1, 2], lambda v: (SELECT setval('file_ids', v)))",
    "SELECT (SELECT x FROM system.main.json_execute_serialized_sql("
    "json_serialize_sql('SELECT 1 AS x')))",
    "SELECT * FROM enable_logging()",
    "SELECT write_log('x')",
    "PIVOT runs ON status USING count(*)",  # DuckDB cannot serialize it: refused, unchecked
]


@pytest.mark.parametrize("sql", FUNCTION_ATTACKS, ids=[s[:60] for s in FUNCTION_ATTACKS])
def test_functions_that_run_sql_or_change_state_are_refused(server, sql):
    """Issue 7 review F1/F2: a function that runs a statement of its own or changes state is
    refused before it runs, plain and under EXPLAIN ANALYZE; rows, sequences, resource types
    and files stay as they were."""
    before_files, before_state = files(server.logdir, with_db=False), server.state()
    for text in (sql, f"EXPLAIN ANALYZE {sql}"):
        begun = time.monotonic()
        response = server.sql(text)
        assert response.status_code == 403, response.text
        assert time.monotonic() - begun < TIME_LIMIT, "refused only after it ran"
    assert files(server.logdir, with_db=False) == before_files
    assert server.state() == before_state


def test_every_table_function_was_reviewed():
    """A table function a new DuckDB adds is refused until it is put on one of the lists."""
    found = {name for (name,) in duckdb.connect().execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'table_macro')").fetchall()}
    lists = [TABLE_FUNCTIONS, REFUSED_FUNCTIONS, LEFT_OUT, FILE_FUNCTIONS, PATH_FUNCTIONS]
    assert found - set().union(*lists) == set()
    assert sum(len(names) for names in lists) == len(set().union(*lists)), "on two lists"


def test_every_named_query_passes_the_function_check():
    cursor = duckdb.connect()
    for name in queries.names():
        check_functions(cursor, read_statement(queries.load(name).text()).read)


def test_builtin_macros_call_no_refused_function():
    """Macros expand after the parse tree is checked, so none may hide a refused function."""
    macros = duckdb.connect().execute(
        "SELECT function_name, macro_definition FROM duckdb_functions() "
        "WHERE macro_definition IS NOT NULL").fetchall()
    called = re.compile(r'"?(\w+)"?\s*\(')
    refused = REFUSED_FUNCTIONS | FILE_FUNCTIONS | PATH_FUNCTIONS | {"current_setting"}
    for name, definition in macros:
        if name in refused:  # pg_sleep calls sleep_ms, and is refused itself
            continue
        names = {m.lower() for m in called.findall(definition)}
        assert not names & refused, name
        # a macro that hands an argument to query_table reads a file if it names one
        assert "query_table" not in names or name in TABLE_NAME_FUNCTIONS, name


def test_reads_that_call_allowed_functions_still_work(server):
    response = server.sql("SELECT count(*) FROM metrics, range(2) "
                          "WHERE step IN (SELECT unnest(generate_series(1, 3)))")
    assert response.status_code == 200 and response.json()["rows"] == [[6]], response.text
    for sql in ("SUMMARIZE SELECT step FROM metrics", "SELECT * FROM duckdb_tables()",
                "SELECT json_serialize_sql('SELECT 1') IS NOT NULL",
                "SELECT * FROM histogram(metric_rows, step)", "SHOW TABLES", "SHOW ALL TABLES",
                "SUMMARIZE metric_rows", "DESCRIBE metrics", "SELECT * FROM query_table(runs)",
                "SELECT * FROM histogram(source := 'metric_rows', col_name := step * 2)",
                "SELECT current_setting('memory_limit')", "SELECT * FROM duckdb_memory()",
                "WITH \"my runs\" AS (FROM runs) SELECT * FROM \"my runs\""):
        assert server.sql(sql).status_code == 200, sql


def test_huge_values_are_sized_before_python_sees_them(server):
    """Issue 7 review F3: a 40 MB list is refused as Arrow bytes, never converted to Python
    ints holding the GIL (before: /api/health waited 0.9 s, and a 200 came 4.7 s into a 4 s
    limit); the answer says the one value is over the cap."""
    def health_wait() -> float:
        begun = time.monotonic()
        assert httpx.get(server.url + "/api/health", timeout=60).status_code == 200
        return time.monotonic() - begun

    # the machine's own pace, measured alike: on 2 loaded cores an idle /api/health can take
    # 0.2 s, so the bound is the GIL's share (the old conversion: 0.9 s on a quiet machine)
    # over what the same requests take with no query running
    idle = max(health_wait() for _ in range(10))
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(server.sql, "SELECT range(5000000) AS r")
        time.sleep(0.2)
        waits = []
        while not answer.done():
            waits.append(health_wait())
            time.sleep(0.05)
        response = answer.result()
    body = response.json()
    assert max(waits, default=0) < 0.4 + 2 * idle, \
        f"/api/health waited {max(waits):.2f} s (idle: {idle:.2f} s)"
    if response.status_code != 408:  # DuckDB alone may pass the limit on a slow machine
        assert response.status_code == 200, body
        assert body["row_count"] == 0 and body["truncated"] is True
        assert "first row alone is over" in body["truncated_reason"]
        # sizing the answer is milliseconds past the query (the conversion it replaced ran
        # 0.7 s past the limit): a query that ends just under a loaded machine's limit may
        # still answer a few hundredths after it (4.04 s seen once in a full run)
        assert body["elapsed_s"] < TIME_LIMIT + 0.25


@pytest.mark.parametrize("sql", [
    "SELECT 18446744073709551616::HUGEINT AS h",
    "SELECT sum(hash(i)) AS h FROM range(1000) AS t(i)",
])
def test_integers_past_64_bits_come_back_as_strings(server, local_logs, sql):
    """Issue 7 review F5: orjson refuses them (a 500 and a traceback before)."""
    response = server.sql(sql)
    assert response.status_code == 200, response.text
    [[value]] = response.json()["rows"]
    assert isinstance(value, str) and int(value) > 2**63
    done = run_cli("sql", sql, "--format", "json", "--logdir", str(local_logs))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)[0]["h"] == value


def test_every_duckdb_type_comes_back_as_json(server):
    response = server.sql("SELECT * FROM test_all_types()")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["row_count"] == 3
    row = dict(zip(body["columns"], body["rows"][1], strict=True))
    assert row["uhugeint"] == str(2**128 - 1) and row["hugeint"] == str(2**127 - 1)
    assert row["ubigint"] == 2**64 - 1 and row["bigint"] == 2**63 - 1


def test_unknown_metric_is_named_in_a_short_message(server):
    """Issue 7 review F6: not DuckDB's Binder error listing every column."""
    response = httpx.get(server.url + "/api/query/downsample",
                         params={"run": "r", "metric": "oss"}, timeout=30)
    error = response.json()["error"]
    assert response.status_code == 400 and "has no metric 'oss'" in error, error
    assert "Binder" not in error and "elapsed_s" not in error and len(error) < 300


# Issue 18, 15: a file reader reached the database file itself (DuckDB adds the database, its
# WAL and its temp folder to allowed_directories by itself), and settings named every path.
# DB stands for the database file of the server or CLI under test, DBDIR for its folder.
FILE_READS = [
    "SELECT size FROM read_blob('DB')",
    "SELECT * FROM read_blob('file://DB')",
    "SELECT * FROM read_blob(['DB', 'DB.wal'])",
    "SELECT * FROM read_blob(concat('DB', ''))",
    "SELECT * FROM read_blob('DBDIR/*')",
    "SELECT * FROM read_blob('DBDIR/../.cliffwatch/cliffwatch.duckdb')",
    "SELECT * FROM \"READ_BLOB\"('DB')",
    "SELECT (SELECT size FROM read_blob('DB'))",
    "WITH f AS (SELECT * FROM read_blob('DB')) SELECT size FROM f",
    "SELECT * FROM read_text('DB.wal')",
    "SELECT * FROM read_csv('DB', all_varchar = true)",
    "SELECT * FROM read_json('DB')",
    "SELECT * FROM read_parquet('DB')",
    "SELECT * FROM parquet_metadata('DB')",
    "SELECT * FROM parquet_schema('DB')",
    "SELECT * FROM sniff_csv('DB')",
    "SELECT * FROM glob('DBDIR/*')",
    "SELECT * FROM glob('DB.tmp/*')",
    "SELECT * FROM 'DB'",
    "SELECT * FROM 'DBDIR/*.csv'",
    "SELECT * FROM main.\"DB\"",
    "DESCRIBE 'DB'",
    "SUMMARIZE 'DB'",
    "SELECT * FROM query_table('DB')",
    "SELECT * FROM query_table(['runs', 'DB'])",
    "SELECT * FROM histogram('DB', x)",
    "SELECT * FROM histogram(source := 'DB', col_name := x)",
    "SELECT * FROM histogram(\"DB\", x)",
    "SELECT * FROM histogram(concat('run', 's'), run)",
]
PATH_READS = [
    "SELECT current_setting('temp_directory')",
    "SELECT current_setting('allowed_directories')",
    "SELECT current_setting('allowed_paths')",
    "SELECT current_setting('home_directory')",
    "SELECT current_setting('secret_directory')",
    "SELECT current_setting('Temp_Directory')",
    "SELECT current_setting('temp_' || 'directory')",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM pg_settings",
    "SELECT * FROM duckdb_profiling_settings()",
    "SELECT path FROM duckdb_databases()",
    "SELECT * FROM duckdb_databases",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM pg_catalog.pg_database",
    "SHOW DATABASES",
    "SELECT * FROM duckdb_extensions()",
    "SELECT * FROM duckdb_temporary_files()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM which_secret('s3://bucket/x', 's3')",
]


def leak_text(sql: str, logdir: Path) -> str:
    db = logdir / ".cliffwatch" / "cliffwatch.duckdb"
    return sql.replace("DBDIR", str(db.parent)).replace("DB", str(db))


@pytest.mark.parametrize("sql", FILE_READS)
def test_api_sql_reads_no_file(server, sql):
    """Through /api/sql, plain and under EXPLAIN ANALYZE: every spelling of a file read is
    refused, before DuckDB opens the file (before: read_blob returned the database file)."""
    for text in (leak_text(sql, server.logdir), f"EXPLAIN ANALYZE {leak_text(sql, server.logdir)}"):
        response = server.sql(text)
        assert response.status_code == 403, response.text
        assert "never files" in response.json()["error"], response.text


@pytest.mark.parametrize("sql", PATH_READS)
def test_api_sql_shows_no_path(server, sql):
    for text in (sql, f"EXPLAIN ANALYZE {sql}"):
        response = server.sql(text)
        assert response.status_code == 403, response.text
        assert str(server.logdir) not in response.text and str(Path.home()) not in response.text


@pytest.mark.parametrize("sql", [FILE_READS[0], "SELECT * FROM 'DB'", FILE_READS[-3],
                                 PATH_READS[0], "SELECT * FROM pragma_database_list"])
def test_cli_reads_no_file_and_shows_no_path(local_logs, sql):
    done = run_cli("sql", leak_text(sql, local_logs), "--logdir", str(local_logs))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "never files" in done.stderr or "paths" in done.stderr, done.stderr
    assert str(local_logs) not in done.stdout


def test_cli_through_server_reads_no_file(server):
    for sql in (FILE_READS[0], PATH_READS[0]):
        done = run_cli("sql", leak_text(sql, server.logdir), "--logdir", str(server.logdir))
        refused = "is refused" in done.stderr or "never files" in done.stderr
        assert done.returncode == 2 and refused, done.stderr


def test_shown_settings_name_no_path(server):
    for name in sorted(SHOWN_SETTINGS):
        response = server.sql(f"SELECT current_setting('{name}') AS v")
        assert response.status_code == 200, (name, response.text)
        [[value]] = response.json()["rows"]
        assert str(server.logdir) not in str(value) and str(Path.home()) not in str(value), name


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_blob('DB')",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM pg_settings",
    "SELECT * FROM duckdb_profiling_settings()",
])
def test_plan_check_refuses_files_and_paths_if_the_function_check_were_fooled(tmp_path, sql):
    """Views and macros call duckdb_databases() or duckdb_settings() out of the parse tree's
    sight; the plan names them."""
    db = Database(tmp_path / "db.duckdb", allowed_dirs=[tmp_path / "logs"])
    with pytest.raises(CliffwatchError, match=r"never files|paths") as refused:
        check_plan(db.cursor(), sql.replace("DB", str(tmp_path / "db.duckdb")))
    assert refused.value.status == 403
    db.close()
