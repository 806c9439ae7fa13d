"""Files never read, with no word (issue 18, finding 5): a trainer_state.json cut by an
interrupted save, and a run folder that cannot be listed. Each is said once, in ingest_errors
(and the log), and is read as soon as it can be: the file when it changes, the folder at the
next tick once its permissions are fixed (no inotify event says a folder's mode changed; the
sweep found it after about 110 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.app.test_ingest_bad_input import _as_nobody, open_tmp  # noqa: F401 (a fixture)
from tests.conftest import ROOT, run_cli

CUT_REASON = ("trainer_state.json: incomplete JSON, perhaps a save in progress; read again "
              "when it changes")


def _state(steps: range) -> bytes:
    """As the Trainer writes it."""
    history = [{"epoch": s / 100, "loss": 1.0 / s, "step": s} for s in steps]
    return (json.dumps({"epoch": 0.05, "global_step": 5, "log_history": history,
                        "num_train_epochs": 3}, indent=2, sort_keys=True) + "\n").encode()


def test_a_trainer_state_cut_by_a_save_is_said_once_and_read_when_it_changes(tmp_path):
    logs = tmp_path / "logs"
    path = logs / "hf" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    whole = _state(range(1, 6))
    path.write_bytes(whole[:len(whole) // 2])
    db = str(tmp_path / "cw.duckdb")
    first = run_cli("ingest", "--logdir", str(logs), "--db", db, "--once")
    assert first.returncode == 0, first.stderr
    assert "1 new ingest errors" in first.stdout
    assert f"warning hf/trainer_state.json @ {len(whole) // 2}: {CUT_REASON}" in " ".join(
        first.stdout.split())
    again = run_cli("ingest", "--logdir", str(logs), "--db", db, "--once")
    assert "ingested 0 rows from 1 files; 0 new ingest errors" in again.stdout  # said once
    path.write_bytes(whole)  # the next save completes
    done = run_cli("ingest", "--logdir", str(logs), "--db", db, "--once")
    assert "ingested 5 rows from 1 files; 0 new ingest errors" in done.stdout, done.stdout


CHILD = """
import dataclasses, logging, sys, time
from pathlib import Path
from app import settings
from app.ingest.activity import Changes
from app.monitor import Monitor

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
logs, go = Path(sys.argv[1]), Path(sys.argv[2])
# no sweep: the next tick must find the folder by itself
with Monitor.open(logs, dataclasses.replace(settings.resolve(), scan_interval=1e6)) as mon:
    mon.tailer.tick(discover=True)
    for _ in range(3):  # ticks as the ingest worker runs them with no event
        mon.tailer.tick(changes=Changes())
    sql = mon.db.cursor().execute
    print("errors", sql("SELECT file, severity, reason FROM ingest_errors").fetchall())
    print("before", sql("SELECT run, step FROM metrics ORDER BY run").fetchall(), flush=True)
    (go.parent / "waiting").touch()
    while not go.exists():
        time.sleep(0.02)
    mon.tailer.tick(changes=Changes())  # one tick, no event
    print("after", sql("SELECT run, step FROM metrics ORDER BY run").fetchall(), flush=True)
"""


def test_an_unreadable_run_folder_or_file_is_said_once_and_read_at_the_next_tick(open_tmp):  # noqa: F811
    logs = open_tmp / "logs"
    for run in ("locked", "lockedfile", "open"):
        (logs / run).mkdir(parents=True)
        (logs / run / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 1.0}\n')
        (logs / run / "metrics.jsonl").chmod(0o644)
    for folder in (logs, logs / "open", logs / "lockedfile"):
        folder.chmod(0o777)
    (logs / "locked").chmod(0o000)
    (logs / "lockedfile" / "metrics.jsonl").chmod(0o000)  # a file alone: the same promise
    child = subprocess.Popen(
        _as_nobody([sys.executable, "-c", CHILD, str(logs), str(open_tmp / "go")]), cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "HOME": str(open_tmp), "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 120
        while not (open_tmp / "waiting").exists() and child.poll() is None:
            assert time.monotonic() < deadline, "the child never got to wait"
            time.sleep(0.05)
        (logs / "locked").chmod(0o755)  # the user fixes them
        (logs / "lockedfile" / "metrics.jsonl").chmod(0o644)
        (open_tmp / "go").touch()
        out, _ = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, out
    lines = out.splitlines()
    logged = [line for line in lines if line.startswith("LOG ") and "locked" in line]
    assert len(logged) == 1, out  # the server log says it once, not once per tick
    (errors,) = [line for line in lines if line.startswith("errors")]
    assert errors.count("'locked', 'warning', 'the folder locked cannot be listed (permission "
                        "denied)") == 1, out
    assert errors.count("'lockedfile/metrics.jsonl', 'error', 'cannot read the file: "
                        "permission denied") == 1, out
    assert "before [('open', 1)]" in lines, out
    assert "after [('locked', 1), ('lockedfile', 1), ('open', 1)]" in lines, out


def test_ingest_once_names_the_folder_it_cannot_list(open_tmp):  # noqa: F811
    logs = open_tmp / "logs"
    (logs / "locked").mkdir(parents=True)
    (logs / "locked" / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 1.0}\n')
    logs.chmod(0o777)
    (logs / "locked").chmod(0o000)
    cmd = _as_nobody([sys.executable, "-m", "app", "ingest", "--logdir", str(logs), "--once"])
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(open_tmp)})
    (logs / "locked").chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert "1 new ingest errors" in done.stdout
    assert "warning locked: the folder locked cannot be listed" in done.stdout, done.stdout
    assert "the folder locked cannot be listed" in done.stderr  # the log says it too
    assert Path(logs / "locked" / "metrics.jsonl").exists()
