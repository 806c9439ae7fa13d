"""However a training process ends, its log says so: real subprocesses, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from app.logformat import validate_run
from tests.conftest import ROOT, wait_for

PRELUDE = """
import signal, sys, time
import cliffwatch
run = cliffwatch.init(logdir=sys.argv[1], name="r", system=False)
"""


def start(tmp_path: Path, body: str, prelude: str = PRELUDE) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(prelude + body)
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs")], cwd=tmp_path,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_end(tmp_path: Path) -> dict:
    events = [json.loads(x) for x in (tmp_path / "runs" / "r" / "events.jsonl").open()]
    ends = [e for e in events if e["event"] == "run_end"]
    assert len(ends) == 1, events
    return ends[0]


def test_an_uncaught_exception_records_run_end_with_the_error(tmp_path):
    proc = start(tmp_path, "run.log({'loss': 1.0}, step=3)\nraise ValueError('loss exploded')\n")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "ValueError: loss exploded" in err  # the traceback stays
    end = run_end(tmp_path)
    assert (end["status"], end["reason"], end["step"]) == ("failed", "error", 3)
    assert end["error"] == "ValueError: loss exploded"
    assert validate_run(tmp_path / "runs" / "r") == []


def test_exiting_without_finish_records_a_finished_run(tmp_path):
    proc = start(tmp_path, "run.log({'loss': 1.0}, step=3)\n")
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert run_end(tmp_path)["reason"] == "finished"


LOOP = """
print("ready", flush=True)
step = 0
while True:
    step += 1
    run.log({"loss": 1.0 / step}, step=step)
    print(step, flush=True)  # the line is logged: after SIGKILL it must be in the file
    time.sleep(0.003)
"""


def test_sigterm_records_run_end_and_still_ends_the_process(tmp_path):
    proc = start(tmp_path, LOOP)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM  # the signal's default: killed by it
    end = run_end(tmp_path)
    assert (end["status"], end["reason"], end["error"]) == ("interrupted", "sigterm", "SIGTERM")


CHAINED = """
import signal, sys, time
import cliffwatch
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))  # before init, as a launcher would
run = cliffwatch.init(logdir=sys.argv[1], name="r", system=False)
print("ready", flush=True)
while not stop:
    run.log({"loss": 1.0})
    time.sleep(0.002)
run.log({"saved": 1.0})
cliffwatch.finish()
"""


def test_sigterm_reaches_the_programs_own_handler_which_decides(tmp_path):
    """A handler of the program's own (a graceful stop) is called; the run ends when the
    program says so, not at the signal."""
    proc = start(tmp_path, CHAINED, prelude="")
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert run_end(tmp_path)["reason"] == "finished"
    last = (tmp_path / "runs" / "r" / "metrics.jsonl").read_text().splitlines()[-1]
    assert "saved" in json.loads(last)


def test_sigkill_loses_at_most_the_line_being_written(tmp_path):
    proc = start(tmp_path, LOOP)
    assert proc.stdout.readline() == "ready\n"
    acked = [int(proc.stdout.readline()) for _ in range(200)]
    proc.kill()
    proc.communicate(timeout=60)
    data = (tmp_path / "runs" / "r" / "metrics.jsonl").read_bytes()
    assert data.endswith(b"\n")
    steps = [json.loads(line)["step"] for line in data.splitlines()]
    assert steps == list(range(1, len(steps) + 1))
    assert steps[-1] >= acked[-1]


def test_a_burst_is_in_the_file_within_the_flush_period(tmp_path):
    """10,000 lines at once wait for the flusher (FLUSH_S): a tailing monitor sees them
    all soon, with no finish() and the process still running."""
    proc = start(tmp_path, "for s in range(10000):\n    run.log({'loss': 1.0}, step=s)\n"
                           "print('logged', flush=True)\ntime.sleep(60)\n")
    try:
        assert proc.stdout.readline() == "logged\n"
        path = tmp_path / "runs" / "r" / "metrics.jsonl"
        wait_for(lambda: path.read_bytes().count(b"\n") == 10000, 10, 0.05)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
