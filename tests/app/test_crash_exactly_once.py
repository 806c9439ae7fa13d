"""SIGKILL the ingest process at 20 random moments while a writer appends 200,000 lines
across several runs; every line must end up in metrics_all exactly once and ingest_errors
must hold exactly the planted bad lines."""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, run_cli

LINES, RUNS, WRITE_SECONDS, KILLS = 200_000, 4, 20.0, 20


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    writer = subprocess.Popen([sys.executable, str(ROOT / "tests/app/log_writer.py"),
                               str(logdir), str(LINES), str(RUNS), str(WRITE_SECONDS)])
    rng = random.Random(20261129)
    for kill in range(KILLS):
        ingest = subprocess.Popen([sys.executable, "-m", "app", "ingest", "--logdir",
                                   str(logdir)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        # every fourth kill at a moment from the launch, start-up included; the others at a
        # moment of the work, after the process says it follows the folder (its database
        # open, its worker started): on a loaded machine start-up alone can outlast 1.5 s
        if kill % 4:
            ingest.stdout.readline()
        time.sleep(rng.uniform(0.3, 1.5) if kill % 4 == 0 else rng.uniform(0.0, 1.2))
        os.kill(ingest.pid, signal.SIGKILL)
        ingest.wait()
        ingest.stdout.close()
    assert writer.wait(timeout=120) == 0
    done = run_cli("ingest", "--logdir", str(logdir), "--once")
    assert done.returncode == 0, done.stderr
    # the killed processes did some of the work (else no kill landed inside ingest): how
    # much depends on how fast a loaded machine starts them, so only that some was done
    caught_up = int(done.stdout.split()[1])
    assert caught_up < LINES - len(json.loads((tmp_path / "manifest.json").read_text())
                                   ["planted"]), done.stdout

    planted = {tuple(p) for p in json.loads((tmp_path / "manifest.json").read_text())["planted"]}
    good = LINES - len(planted)
    query = ("SELECT count(*), count(DISTINCT seq), min(seq), "
             "(SELECT count(*) FROM ingest_errors) FROM metrics_all")
    out = run_cli("sql", query, "--logdir", str(logdir), "--format", "json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)[0]
    assert list(row.values()) == [good, good, 0, len(planted)]
    errors = run_cli("sql", 'SELECT file, "offset", severity FROM ingest_errors', "--logdir",
                     str(logdir), "--format", "json")
    found = {(e["file"], e["offset"]) for e in json.loads(errors.stdout)}
    assert found == planted
    assert {e["severity"] for e in json.loads(errors.stdout)} == {"error"}


SMALL_RUNS, SMALL_LINES, SMALL_KILLS = 120, 600, 4


def inside_batch(ingest: subprocess.Popen, logdir, timeout: float = 60.0) -> bool:
    """Wait until the process writes a group's scratch file (it is storing a group), or
    exits; True if it is storing one."""
    patterns = [f"/dev/shm/.cliffwatch-scratch-{ingest.pid}-*/*.jsonl",
                str(logdir / ".cliffwatch" / f".cliffwatch-scratch-{ingest.pid}-*" / "*.jsonl")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and ingest.poll() is None:
        if any(glob.glob(pattern) for pattern in patterns):
            return True
        time.sleep(0.005)
    return False


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def worked(process: subprocess.Popen, seconds: float, timeout: float = 60.0) -> None:
    """Wait until ``process`` has used ``seconds`` more CPU, or exits."""
    start = cpu_seconds(process.pid)
    deadline = time.monotonic() + timeout
    while start is not None and process.poll() is None and time.monotonic() < deadline:
        now = cpu_seconds(process.pid)
        if now is None or now - start >= seconds:
            return
        time.sleep(0.002)


def small_log(run: int, start: int, lines: int) -> bytes:
    return b"".join(json.dumps({"step": step + 1, "loss": 0.5, "seq": run * 100_000 + step})
                    .encode() + b"\n" for step in range(start, start + lines))


def test_sigkill_during_a_batched_catch_up_of_many_small_logs(tmp_path):
    """Many new small logs are stored a group to a transaction (app/ingest/batch.py), each
    group committing its files' rows and positions together. SIGKILL `ingest --once` at
    random moments of that catch-up while runs appear and grow between the kills: every
    line is stored exactly once, and the logs went by the batch."""
    logdir = tmp_path / "logs"
    rng = random.Random(20261130)
    written = {}

    def grow(run: int, lines: int) -> None:
        path = logdir / f"run{run:03d}" / "metrics.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as handle:
            handle.write(small_log(run, written.get(run, 0), lines))
        written[run] = written.get(run, 0) + lines

    for run in range(SMALL_RUNS):
        grow(run, SMALL_LINES)
    env = dict(os.environ, CLIFFWATCH_CHUNK_BYTES="1")  # groups of ~1 MiB: many commits
    landed = 0
    for kill in range(SMALL_KILLS):
        ingest = subprocess.Popen([sys.executable, "-m", "app", "ingest", "--logdir",
                                   str(logdir), "--once"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL)
        landed += inside_batch(ingest, logdir)
        # a random moment of the process's own work, not of the wall clock: on a loaded
        # machine 0.1 s of wall time can pass before the first group commits, and then no
        # kill did any work
        worked(ingest, rng.uniform(0.0, 0.1))
        ingest.send_signal(signal.SIGKILL)  # unless it is done already
        ingest.wait()
        for run in rng.sample(range(SMALL_RUNS + kill * 10), 10):
            grow(run, 7)  # a run read before grows, a new one is batched next time
        for run in range(SMALL_RUNS + kill * 10, SMALL_RUNS + (kill + 1) * 10):
            grow(run, SMALL_LINES)
    done = run_cli("ingest", "--logdir", str(logdir), "--once")
    assert done.returncode == 0, done.stderr
    total = sum(written.values())
    assert landed >= SMALL_KILLS // 2  # most kills came while a group was being stored
    assert int(done.stdout.split()[1]) < total, done.stdout  # the killed ones did some work
    out = run_cli("sql", "SELECT count(*), count(DISTINCT seq), "
                  "(SELECT count(*) FROM ingest_errors) FROM metrics_all",
                  "--logdir", str(logdir), "--format", "json")
    assert out.returncode == 0, out.stderr
    rows, distinct, errors = json.loads(out.stdout)[0].values()
    assert (rows, distinct, errors) == (total, total, 0)
    # a log that grew after it was read takes the per-file path, one commit each (up to 40
    # here); the logs written once went by the batch: groups committed together
    out = run_cli("sql", "SELECT run, updated_at FROM files", "--logdir", str(logdir),
                  "--format", "json")
    once = {f"run{run:03d}" for run, lines in written.items() if lines == SMALL_LINES}
    commits = {f["updated_at"] for f in json.loads(out.stdout) if f["run"] in once}
    assert len(commits) < len(once) / 4, (len(commits), len(once))
