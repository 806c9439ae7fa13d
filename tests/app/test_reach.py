"""Reaching a log directory's database (app/reach.py): the live server, else the file, with
real processes: a real server (found; killed by SIGKILL, its server.json left behind), a real
`ingest` that holds the file and answers nothing, and a process that lets go of it soon, as a
starting server does. Every command decides the same way and says the same thing."""

from __future__ import annotations

import ast
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from app import reach
from app.db.database import Database, DatabaseHeld
from app.monitor import default_db
from app.settings import resolve
from tests.conftest import ROOT, SAMPLES, Server, run_cli, stop_process


def logs_with_a_database(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "seed-cliff-plain", logs / "plain")
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0, done.stderr
    return logs


def follower(logs: Path) -> subprocess.Popen:
    """An `ingest` that keeps following: it holds the database and answers no request."""
    holder = subprocess.Popen([sys.executable, "-m", "app", "ingest", "--logdir", str(logs)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert "following" in holder.stdout.readline()  # it holds the file now
    return holder


def test_a_live_server_is_reached_and_the_file_a_killed_one_left_is_not(tmp_path):
    logs = logs_with_a_database(tmp_path)
    settings = resolve()
    server = Server(logs)
    try:
        found = reach.find_server(logs, settings)
        assert found is not None and found.url == server.url
        assert found.logdir == logs
        assert reach.find_server_above(logs / "plain", settings) == found  # diagnose RUN
        target = reach.open_target(logs, None, settings, command="sql")
        assert isinstance(target, reach.Server)  # the file, held by the server, is not tried
        assert target.call("POST", "/api/sql", json={"sql": "SELECT 1 AS x"})["rows"] == [[1]]
    finally:
        server.proc.send_signal(signal.SIGKILL)  # no clean-up: server.json stays behind
        server.proc.wait()
        server.log.close()
    assert (logs / ".cliffwatch" / "server.json").exists()
    assert reach.find_server(logs, settings) is None  # its pid listens no more
    target = reach.open_target(logs, None, settings, command="sql")
    try:
        assert isinstance(target, Database) and target.read_only
        assert target.cursor().execute("SELECT max(step) FROM metrics").fetchone() == (4499,)
    finally:
        target.close()


def test_a_held_database_names_its_holder_by_type_not_by_text(tmp_path):
    """Where the file is opened, a held file is a DatabaseHeld carrying the holder's pid:
    no command parses "is held by" out of a message any more."""
    logs = logs_with_a_database(tmp_path)
    holder = follower(logs)
    try:
        try:
            Database(default_db(logs), read_only=True, wait_s=0.0)
        except DatabaseHeld as held:
            assert held.holder == holder.pid and held.path == default_db(logs)
        else:
            raise AssertionError("a held database opened")
    finally:
        stop_process(holder)


def test_every_command_says_who_holds_the_file_and_what_to_do(tmp_path):
    """An `ingest` that follows holds the file: `alerts list`, `diagnose` and a second
    `ingest --once` name it, as `sql` does, with what each can do. They advised "run the
    command with --logdir so it talks to the server", which `alerts list` and `ingest` had
    given and `diagnose` has not."""
    logs = logs_with_a_database(tmp_path)
    holder = follower(logs)
    commands = {"alerts": ("alerts", "list", "--logdir", str(logs)),
                "diagnose": ("diagnose", str(logs)),
                "ingest": ("ingest", "--once", "--logdir", str(logs))}
    try:  # all at once: each waits reach.WAIT_S for the holder to let go
        running = {name: subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True) for name, args in commands.items()}
        done = {name: (*proc.communicate(timeout=120), proc.returncode)
                for name, proc in running.items()}
    finally:
        stop_process(holder)
    for name, (_, err, code) in done.items():
        assert code == 2 and "Traceback" not in err, (name, err)
        assert f"is held by process {holder.pid}, which answers no" in err, (name, err)
        assert "--logdir so it talks" not in err, (name, err)
    assert "python -m app serve --logdir DIR" in done["alerts"][1]
    assert "pass --db" in done["diagnose"][1] and "pass --db" in done["ingest"][1]


HOLD_BRIEFLY = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_alerts_list_waits_for_a_holder_that_lets_go_as_sql_does(tmp_path):
    """A server that is starting holds the file before it writes server.json. `sql` and
    `export` waited for it; `alerts list` said at once that the file was held."""
    logs = logs_with_a_database(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_BRIEFLY, str(default_db(logs)), "3"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        listed = run_cli("alerts", "list", "--logdir", str(logs))
        queried = run_cli("sql", "SELECT 1 AS x", "--logdir", str(logs), "--format", "csv")
    finally:
        stop_process(holder)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("rules (built-in")
    assert queried.returncode == 0 and queried.stdout.split() == ["x", "1"]


def test_the_export_does_not_import_the_command_line():
    """app/export is below app/cli: the command line imports it, never the other way."""
    for path in (ROOT / "app" / "export").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert not (node.module or "").startswith("cli"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("app.cli") for a in node.names), path

