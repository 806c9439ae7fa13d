"""A Ctrl-C while the server's first catch-up runs stops it at the next transaction's edge.

uvicorn takes SIGINT as its own once Streamlit's App.run starts, and waits for the lifespan's
start before it stops; the lifespan waited for the whole catch-up. So a Ctrl-C on a big folder
did nothing until every file had its first budget (server/catchup.py). Before App.run, a
KeyboardInterrupt closed the database under the running statement.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import orjson

from tests.conftest import ROOT, free_port, run_cli

RUNS, LINES = 1500, 100


def _folder(logdir) -> None:
    # a string in every line: the careful path, one file to a transaction, which takes
    # seconds for the whole folder (4.7 s on 2 idle cores)
    for run in range(RUNS):
        folder = logdir / f"r{run:04d}"
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_bytes(b"".join(
            orjson.dumps({"step": s, "loss": 1.0 / (s + 1), "phase": "train"}) + b"\n"
            for s in range(LINES)))


def _hear_sigint() -> None:
    # a shell running the suite in the background (`make test &`) gives its children SIGINT
    # ignored, and Python then keeps it ignored: the server must start as a terminal's would
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _counts(db) -> tuple[int, int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT (SELECT count(*) FROM metrics_all), "
                           "(SELECT count(DISTINCT (run, step)) FROM metrics_all), "
                           "(SELECT count(*) FROM ingest_errors)").fetchone()
    finally:
        con.close()


def test_ctrl_c_during_the_first_catch_up_stops_soon_and_loses_nothing(tmp_path):
    logdir = tmp_path / "logs"
    _folder(logdir)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--logdir", str(logdir),
                             "--port", str(free_port())], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_hear_sigint)
    try:
        seen = []
        for line in proc.stderr:  # printed once the catch-up runs, before Streamlit imports
            seen.append(line)
            if "dashboard and API at" in line:
                break
        time.sleep(1.0)  # past Streamlit's import, as a person's Ctrl-C usually is
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, out = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:  # it did not hear the signal: not left running after the test
            proc.kill()
            proc.wait()
    said = "".join(seen) + out
    assert proc.returncode == 130, said
    assert "the database is closed" in said

    db = logdir / ".cliffwatch" / "cliffwatch.duckdb"
    rows, distinct, errors = _counts(db)
    # it stopped early: the rest of the folder was not read before it exited
    assert rows < RUNS * LINES, (took, said)
    assert rows == distinct and errors == rows  # one warning per line stored

    # the next start reads on from the stored offsets: every line once, every warning once
    done = run_cli("ingest", "--logdir", str(logdir), "--once")
    assert done.returncode == 0, done.stderr
    assert _counts(db) == (RUNS * LINES, RUNS * LINES, RUNS * LINES)
