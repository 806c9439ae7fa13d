"""Parquet archive benchmark (issue 12). Prints, for one run of ``--lines`` lines with the
seed's fields, the time of ``python -m app export`` as a whole process and the archive's size:

(a) the first export of the run, with the CLI opening the database itself (also the time the
    export itself took, as the command prints it: the rest is Python's start and imports);
(b) a second export after ``--more`` lines were appended and ingested (only those are written);
(c) both again through a running server (``/api/export``, Arrow over HTTP).

With ``--runs N``, a team's folder instead: N runs of ``--lines`` lines each (200 by default),
the first export with the CLI opening the database, a second one with nothing new, and the
first export through a running server.

    python bench/export.py [--lines 1000000] [--more 10000]
    python bench/export.py --runs 1000 [--lines 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import Server  # noqa: E402


def append(path: Path, start: int, count: int) -> None:
    rng = random.Random(start)
    with path.open("a") as f:
        for step in range(start, start + count):
            f.write(json.dumps({
                "step": step, "loss": rng.random(), "accuracy": rng.random() / 5,
                "avg_streak": 1 + rng.random(), "lr": 3e-4, "noise_std": 0.05,
                "tgt_batch_per_sec": 11.8, "dft_batch_per_sec": 47.1,
                "tok_per_sec": 26000.0 + step % 7, "hs_queue_depth": step % 5,
                "elapsed_s": step * 5.0}) + "\n")


def cli(*args: str) -> tuple[float, str]:
    """Seconds the whole process took, and its last line of output."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, check=True,
                          capture_output=True, text=True)
    return time.monotonic() - started, (done.stdout.strip().splitlines() or [""])[-1]


def size(folder: Path, since: float = 0.0) -> tuple[int, int]:
    """(files, bytes) of the archive's data files written after ``since``."""
    files = [p for p in folder.rglob("*.parquet") if p.stat().st_mtime > since]
    return len(files), sum(p.stat().st_size for p in files)


def export(logdir: Path, archive: Path, label: str) -> None:
    since = time.time()
    seconds, said = cli("export", "--logdir", str(logdir), "--to", str(archive))
    files, total = size(archive, since)
    work = said.rsplit(" in ", 1)[-1]  # the export itself, without start-up and imports
    print(f"{label:<44} {seconds:6.2f} s (export {work:>6})  {files} files  "
          f"{total / 2**20:8.2f} MiB")


def wait_idle(pid: int, below: float = 0.2, timeout: float = 300.0) -> None:
    """Until process ``pid`` uses under ``below`` of a core over a second."""
    deadline = time.monotonic() + timeout
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    while time.monotonic() < deadline:
        before = cpu()
        time.sleep(1.0)
        if cpu() - before < below:
            return


def many_runs(runs: int, lines: int) -> None:
    """A team's folder: ``runs`` finished runs of ``lines`` lines."""
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        for i in range(runs):
            log = logdir / f"sweep{i // 100}" / f"run {i:05d}" / "metrics.jsonl"
            log.parent.mkdir(parents=True)
            append(log, 0, lines)
        started = time.monotonic()
        cli("ingest", "--logdir", str(logdir), "--once")
        print(f"logs: {runs:,} runs x {lines:,} lines (ingest --once "
              f"{time.monotonic() - started:.1f} s)")
        export(logdir, Path(tmp) / "local", f"(a) first export, {runs:,} runs")
        export(logdir, Path(tmp) / "local", "(b) second export, nothing new")
        server = Server(logdir)
        try:
            wait_idle(server.proc.pid)  # its catch-up, diagnosis and chart tiles of the runs
            export(logdir, Path(tmp) / "served", f"(c) first export via server, {runs:,} runs")
            export(logdir, Path(tmp) / "served", "(c) second export, nothing new")
        except httpx.HTTPError as exc:
            print(f"server: {exc}")
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=None,
                        help="lines of the run (1,000,000), or of each run with --runs (200)")
    parser.add_argument("--more", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=0, help="that many small runs instead")
    args = parser.parse_args()
    if args.runs:
        many_runs(args.runs, args.lines or 200)
        return
    args.lines = args.lines or 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        logdir, log = Path(tmp) / "logs", Path(tmp) / "logs" / "big" / "metrics.jsonl"
        log.parent.mkdir(parents=True)
        append(log, 0, args.lines)
        cli("ingest", "--logdir", str(logdir), "--once")
        print(f"log: {args.lines:,} lines, {os.path.getsize(log) / 2**20:.1f} MiB of JSONL")
        export(logdir, Path(tmp) / "local", f"(a) first export, {args.lines:,} lines")
        append(log, args.lines, args.more)
        cli("ingest", "--logdir", str(logdir), "--once")
        export(logdir, Path(tmp) / "local", f"(b) second export, {args.more:,} new lines")
        server = Server(logdir)
        try:
            wait_idle(server.proc.pid)  # its catch-up, diagnosis and chart tiles of the run
            export(logdir, Path(tmp) / "served",
                   f"(c) first export via server, {args.lines + args.more:,} lines")
            append(log, args.lines + args.more, args.more)
            expected = args.lines + 2 * args.more
            while server.sql("SELECT count(*) FROM metrics_all").json()["rows"][0][0] < expected:
                time.sleep(0.1)
            wait_idle(server.proc.pid)
            export(logdir, Path(tmp) / "served", f"(c) second export, {args.more:,} new lines")
        except httpx.HTTPError as exc:
            print(f"server: {exc}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
