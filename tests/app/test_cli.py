"""The command line: replay keeps bytes and pacing; user mistakes get one-line messages."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from app.cli.replay import replay
from tests.conftest import ROOT, SAMPLES, run_cli

GOLDEN_FULL = SAMPLES.parent / "tests" / "data" / "logformat" / "full"


def test_replay_keeps_every_byte_and_interleaves_by_time(tmp_path):
    started = time.monotonic()
    written = replay(GOLDEN_FULL, tmp_path / "copy", speed=10.0)
    took = time.monotonic() - started
    for name in ("metrics.jsonl", "events.jsonl", "rank0.jsonl", "rank1.jsonl"):
        assert (tmp_path / "copy" / name).read_bytes() == (GOLDEN_FULL / name).read_bytes()
    assert (tmp_path / "copy" / "run.json").exists()
    assert written == 5 + 9 + 2 + 2
    # the log spans 3.6 s of elapsed_s; at 10x the replay cannot be faster than 0.36 s
    assert took >= 0.3


def test_replay_refuses_to_overwrite(tmp_path):
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "metrics.jsonl").write_text("{}\n")
    done = run_cli("replay", str(SAMPLES / "seed-cliff-plain"), "--to", str(tmp_path / "dest"))
    assert done.returncode == 2
    assert "already holds a log" in done.stderr and "Traceback" not in done.stderr


def test_user_mistakes_are_one_line_messages(tmp_path):
    missing = run_cli("ingest", "--logdir", str(tmp_path / "nope"), "--once")
    assert missing.returncode == 2
    assert missing.stderr.startswith("cliffwatch: log directory") and "Traceback" not in (
        missing.stderr)
    no_db = run_cli("sql", "SELECT 1", "--logdir", str(tmp_path))
    assert no_db.returncode == 2 and "no database" in no_db.stderr
    bad = run_cli("replay", str(tmp_path / "nothing"), "--to", str(tmp_path / "x"))
    assert bad.returncode == 2 and "neither a run folder" in bad.stderr


def test_ingest_once_then_sql_without_a_server(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    replay(SAMPLES / "seed-cliff-plain", logs / "plain", speed=1e9)
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0 and "ingested 2230 rows from 1 files" in done.stdout
    out = run_cli("sql", "SELECT max(step) AS last FROM metrics", "--logdir", str(logs),
                  "--format", "csv")
    assert out.returncode == 0 and out.stdout.splitlines() == ["last", "4499"]
    table = run_cli("sql", "SELECT step, loss FROM metrics ORDER BY step LIMIT 1", "--logdir",
                    str(logs))
    assert table.stdout.splitlines()[0].split() == ["step", "loss"]
    assert json.loads(run_cli("sql", "SELECT 'NaN'::DOUBLE AS x", "--logdir", str(logs),
                              "--format", "json").stdout) == [{"x": "NaN"}]


def test_validate_command():
    ok = run_cli("validate", str(GOLDEN_FULL))
    assert ok.returncode == 0 and ok.stdout.strip().endswith(": ok")


def test_sql_while_another_process_holds_the_database_says_what_to_do(tmp_path):
    logs = tmp_path / "logs"
    replay(SAMPLES / "seed-cliff-plain", logs / "plain", speed=1e9)
    holder = subprocess.Popen([sys.executable, "-m", "app", "ingest", "--logdir", str(logs)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert "following" in holder.stdout.readline()  # it holds the file now
        done = run_cli("sql", "SELECT 1", "--logdir", str(logs))
    finally:
        holder.terminate()
        holder.wait()
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"is held by process {holder.pid}" in done.stderr
    assert "python -m app serve --logdir DIR" in done.stderr


def test_every_subcommand_prints_its_help(capsys):
    """`python -m app serve --help` is a new user's first command; a stray % in one help text
    once made argparse raise for serve, ingest, sql, export and diagnose."""
    import argparse

    import pytest

    from app.cli.main import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in subs.choices:
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([name, "--help"])
        assert done.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name
