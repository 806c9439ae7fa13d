"""What a new user meets in the first minutes (issue 20, items 13-16), through the CLI as a
subprocess and the real server: a second serve on a served folder, the demo without torch,
the demo's run names, empty and unknown-run answers, the help texts."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from pathlib import Path

import httpx
import pytest

from app.cli import demo
from tests.conftest import ROOT, SAMPLES, Server, free_port, run_cli, wait_for


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    logs = tmp_path_factory.mktemp("first") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff")
    server = Server(logs)
    yield logs, server
    server.stop()


@pytest.mark.parametrize("command", [
    ("serve", "--port", "PORT"), ("ingest", "--once"), ("ingest",), ("serve", "--rebuild"),
    ("demo", "--port", "PORT")])
def test_a_served_folder_says_at_once_where_it_is_served(served, command):
    """Item 14: not "dashboard and API at ...", then a traceback 15 s later advising the
    --logdir that was given; and --rebuild moves nothing aside under the server's feet."""
    logs, server = served
    args = [str(free_port()) if a == "PORT" else a for a in command]
    done = run_cli(*args, "--logdir", str(logs), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{logs} is already served by cliffwatch at {server.url}" in done.stderr
    assert "Traceback" not in done.stderr and "dashboard and API at" not in done.stderr
    assert "--logdir" not in done.stderr.split("served by cliffwatch")[1].split("sql")[0]
    assert not list((logs / ".cliffwatch").glob("*.corrupt-*"))


NO_TORCH = '''
import sys

class NoTorch:
    """This Python as a plain `pip install .` leaves it: no torch."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoTorch())
'''


def test_the_demo_without_torch_says_what_to_install_before_starting(tmp_path):
    """Item 15: not a trainer child dying with a raw ModuleNotFoundError while the demo goes
    on serving the replay alone."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(NO_TORCH)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = run_cli("demo", "--logdir", str(tmp_path / "runs"), "--port", str(free_port()),
                   env=env, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'pip install ".[trainer]"' in done.stderr
    assert "Traceback" not in done.stderr and "open http" not in done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_demo_writer_that_ends_is_reaped_at_once_and_said(tmp_path, capfd):
    """Item 16: a finished demo child no longer stays <defunct> until Ctrl-C."""
    writer = demo._start([sys.executable, "-c", "pass"], "the trainer (demo)")
    wait_for(lambda: not Path(f"/proc/{writer.pid}").exists(), timeout=20)
    wait_for(lambda: "finished" in capfd.readouterr().err, timeout=20)


def test_the_demo_runs_are_named_as_the_readme_uses_them(tmp_path):
    """Item 13: `demo` (the README's `WHERE run = 'demo'` and `diagnose runs/demo`), and
    `demo-2` where an earlier demo left one, not demo-YYYYMMDD-HHMMSS."""
    assert demo.fresh(tmp_path, "demo") == tmp_path / "demo"
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo-2").mkdir()
    assert demo.fresh(tmp_path, "demo") == tmp_path / "demo-3"
    readme = (ROOT / "README.md").read_text()
    assert "WHERE run = 'demo'" in readme and "diagnose runs/demo" in readme


def test_an_unknown_run_says_which_runs_exist_and_empty_says_0_rows(served):
    """Item 13: `sql "... WHERE run = 'demo'"` printed a bare header, and /api/incidents?run=
    answered [] for a run that is not there."""
    logs, server = served
    done = run_cli("sql", "SELECT step, loss FROM metrics WHERE run = 'demo' LIMIT 5",
                   "--logdir", str(logs), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "(0 rows)"
    assert "no run named 'demo'; the runs are seed-cliff" in done.stderr
    named = run_cli("sql", "--query", "time_gaps", "--param", "run=demo", "--logdir",
                    str(logs), timeout=60)
    assert named.returncode == 2 and "the runs are seed-cliff" in named.stderr
    for path in ("/api/incidents?run=demo", "/api/query/stalls?run=demo&min_ratio=5"):
        answer = httpx.get(server.url + path, timeout=30)
        assert answer.status_code == 404, path
        assert "no run named 'demo'; the runs are seed-cliff" in answer.text
    assert httpx.get(server.url + "/api/incidents?run=seed-cliff",
                     timeout=30).status_code == 200


def test_sql_on_a_missing_logdir_says_it_does_not_exist(tmp_path):
    """Item 16: not "no database ... run ingest"."""
    done = run_cli("sql", "SELECT 1", "--logdir", str(tmp_path / "nope"), timeout=60)
    assert done.returncode == 2
    assert f"{tmp_path / 'nope'} does not exist; pass --logdir" in done.stderr


def test_ctrl_c_stops_the_server_with_a_message(tmp_path):
    """Item 16: Ctrl-C ended the server with no word (and 5 s of Python's finalization after
    the database was closed; the time is not asserted here)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    server = Server(logs)
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=60) in (0, 130)  # Streamlit's handler, or Python's
    server.log.close()
    said = Path(server.log.name).read_text()
    assert "cliffwatch: stopped; the database is closed" in said
    assert "Traceback" not in said


def test_help_texts_read_as_help():
    """Item 16: `--help` said "Command line: ``python -m app …``", and `serve --help` printed
    "(default , env …)" for settings without a default."""
    top = run_cli("--help", timeout=60)
    assert top.returncode == 0
    assert "Command line:" not in top.stdout and "``" not in top.stdout
    assert "watch ML training runs live" in top.stdout
    serve = run_cli("serve", "--help", timeout=60)
    assert serve.returncode == 0
    flat = " ".join(serve.stdout.split())
    assert "(default , env" not in flat and "(no default, env CLIFFWATCH_TOKEN)" in flat
    # a setting with a default still prints it and its variable
    assert re.search(r"\(default \d[^,()]*, env CLIFFWATCH_[A-Z_]+\)", flat), flat


def readme_diagnose_sample() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("What `diagnose samples/seed-cliff` says", 1)[1]
    return block.split("```\n", 2)[1].splitlines()


def test_the_readme_diagnose_sample_is_what_diagnose_prints(tmp_path):
    """Item 13: the README showed a cliff "0.0916, down from 0.1608 (-43%)" that diagnose no
    longer printed. Each line of its sample is a line of the output (one ending in "(...)"
    the start of one)."""
    shutil.copytree(SAMPLES / "seed-cliff", tmp_path / "seed-cliff")
    done = run_cli("diagnose", str(tmp_path / "seed-cliff"), timeout=120)
    printed = done.stdout.splitlines()
    for line in readme_diagnose_sample():
        if line.endswith("(...)."):
            assert any(p.startswith(line.removesuffix("(...).")) for p in printed), line
        else:
            assert line in printed, line
