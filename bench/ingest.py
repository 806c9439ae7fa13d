"""Ingest benchmark (backbone issue, issue 10). Prints:

(a) catch-up as a user runs it: ``python -m app ingest --logdir DIR --once`` on a fresh
    database, as a whole process, against a whole Python process doing DuckDB's own
    ``CREATE TABLE t AS SELECT * FROM read_json(...)`` into a DuckDB file, on the same
    1,000,000-line log with the seed's fields; median of 3 each (interleaved, so both see the
    same machine), and the ratio yardstick / ours (target >= 0.8). Both pay their interpreter's
    start, imports and closing the database: a user waits for all of it. The app's modules are
    compiled first (``compileall``), as Python caches them after a first run or pip does at
    install: a sandbox with PYTHONDONTWRITEBYTECODE=1 would otherwise make every run compile
    them again, which no user pays (the figure without it is printed too);
(b) latency from a line's append to its visibility in SELECT while a writer appends 1,000
    lines/s, p50 and p99 (target p99 <= 300 ms);
(c) peak RSS of the ingest process during the catch-up (target <= 400 MB);
(d) catch-up of a runs folder (issue 12): ``--small-files`` runs of ``--lines`` /
    ``--small-files`` lines each (1,000 x 1,000: the same rows as the one log of (a)), as a
    whole ``ingest --once`` process, median of ``--runs``, measured in the same loop as (a)'s
    one log, and the ratio of the two (target <= 3).

    python bench/ingest.py [--lines 1000000] [--runs 3] [--latency-seconds 10]
                           [--small-files 1000]

``--latency-seconds 0`` leaves (b) out, ``--small-files 0`` leaves (d) out; ``--only-files``
runs (a)'s one log and (d) alone, without the yardstick.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import settings as settings_mod  # noqa: E402
from app.ingest.worker import IngestWorker  # noqa: E402
from app.monitor import Monitor  # noqa: E402


def seed_line(rng: random.Random, step: int) -> str:
    return json.dumps({
        "step": step, "loss": rng.random(), "accuracy": rng.random() / 5,
        "avg_streak": 1 + rng.random(), "lr": 3e-4, "noise_std": 0.05,
        "tgt_batch_per_sec": 11.8, "dft_batch_per_sec": 47.1, "tok_per_sec": 26000.0 + step % 7,
        "hs_queue_depth": step % 5, "elapsed_s": step * 5.0})


def generate(path: Path, lines: int) -> None:
    rng = random.Random(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for start in range(0, lines, 10_000):
            handle.write("\n".join(seed_line(rng, s) for s in range(start, min(lines, start
                                                                                + 10_000))))
            handle.write("\n")


# the yardstick: what DuckDB alone needs, in a process of its own, to load the log into a file
YARDSTICK = """
import sys, duckdb
con = duckdb.connect(sys.argv[2])
con.execute("SET enable_progress_bar = false")  # it would print into the row count
con.execute("CREATE TABLE t AS SELECT * FROM read_json($p, format = 'newline_delimited')",
            {"p": sys.argv[1]})
print(con.execute("SELECT count(*) FROM t").fetchone()[0])
con.close()
"""


def timed_process(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one whole process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()  # small: the pipes cannot fill
    # reaped here, not by Popen: wait4 gives this child's own peak RSS (RUSAGE_CHILDREN
    # would give the largest of all children so far, the yardstick's included)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err.decode()}")
    return elapsed, usage.ru_maxrss / 1024, out.decode()


def yardstick(log: Path, work: Path, lines: int) -> float:
    db = work / "yardstick.duckdb"
    db.unlink(missing_ok=True)
    seconds, _, out = timed_process([sys.executable, "-c", YARDSTICK, str(log), str(db)])
    db.unlink()
    if int(out) != lines:
        raise SystemExit(f"the yardstick loaded {out.strip()} rows, not {lines}")
    return seconds


def generate_runs(logdir: Path, files: int, lines: int) -> None:
    """``files`` run folders of ``lines`` lines each, the seed's fields (one generator: the
    same rows as ``generate``'s one log)."""
    rng = random.Random(0)
    for run in range(files):
        path = logdir / f"run{run:05d}" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(seed_line(rng, step) + "\n" for step in range(lines)))


def catch_up(logdir: Path, lines: int) -> tuple[float, float]:
    """(seconds, peak RSS MB) of ``python -m app ingest --once`` on a fresh database."""
    shutil.rmtree(logdir / ".cliffwatch", ignore_errors=True)
    seconds, peak, out = timed_process(
        [sys.executable, "-m", "app", "ingest", "--logdir", str(logdir), "--once"])
    if f"ingested {lines} rows" not in out:
        raise SystemExit(f"the catch-up did not ingest every line: {out}")
    return seconds, peak


def latency(workdir: Path, seconds: float, rate: int = 1000) -> list[float]:
    logdir = workdir / "live"
    (logdir / "run").mkdir(parents=True)
    settings = settings_mod.resolve()
    monitor = Monitor.open(logdir, settings)
    worker = IngestWorker(monitor.tailer, settings)
    worker.start()
    writer = subprocess.Popen([sys.executable, __file__, "--write", str(logdir / "run" /
                               "metrics.jsonl"), "--latency-seconds", str(seconds)])
    cur, seen, delays = monitor.db.cursor(), -1, []
    deadline = time.time() + seconds + 5
    while time.time() < deadline and len(delays) < seconds * rate:
        rows = cur.execute("SELECT seq, sent FROM metrics_all WHERE seq > $s",
                           {"s": seen}).fetchall() if seen >= 0 or _has(cur) else []
        now = time.time()
        for seq, sent in rows:
            delays.append(now - sent)
            seen = max(seen, seq)
        time.sleep(0.005)
    writer.wait()
    worker.stop()
    monitor.close()
    return delays


def _has(cur) -> bool:
    names = {r[0] for r in cur.execute("SELECT column_name FROM information_schema.columns "
                                       "WHERE table_name = 'metric_rows'").fetchall()}
    return "sent" in names


def write_paced(path: Path, seconds: float, rate: int = 1000) -> None:
    rng = random.Random(1)
    start = time.time()
    with path.open("a") as handle:
        for i in range(int(seconds * rate)):
            target = start + i / rate
            pause = target - time.time()
            if pause > 0:
                time.sleep(pause)
            obj = json.loads(seed_line(rng, i))
            obj.update(seq=i, sent=time.time())
            handle.write(json.dumps(obj) + "\n")
            handle.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--small-files", type=int, default=1000)
    parser.add_argument("--only-files", action="store_true")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    if args.write:
        return write_paced(args.write, args.latency_seconds)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log = work / "logs" / "bench" / "metrics.jsonl"
        generate(log, args.lines)
        size_mb = log.stat().st_size / 1e6
        runs_dir = work / "runs"
        if args.small_files:
            generate_runs(runs_dir, args.small_files, args.lines // args.small_files)
        ours, theirs, peaks, many = [], [], [], []
        cold = catch_up(log.parent.parent, args.lines)[0]  # before any .pyc: every module compiled
        subprocess.run([sys.executable, "-m", "compileall", "-q", "app"], cwd=ROOT, check=True)
        for _ in range(args.runs):
            if not args.only_files:
                theirs.append(yardstick(log, work, args.lines))
            seconds, peak = catch_up(log.parent.parent, args.lines)
            ours.append(seconds)
            peaks.append(peak)
            if args.small_files:
                many.append(catch_up(runs_dir, args.small_files * (args.lines
                                                                   // args.small_files)))
        delays = None
        if args.latency_seconds > 0 and not args.only_files:
            delays = np.array(latency(work, args.latency_seconds)) * 1000
    report(args, size_mb, ours, theirs, peaks, many, cold, delays)


def report(args, size_mb, ours, theirs, peaks, many, cold, delays) -> None:
    ours_s = statistics.median(ours)
    print(f"log: {args.lines:,} lines, {size_mb:.0f} MB, seed fields")
    if many:
        many_s = statistics.median(seconds for seconds, _ in many)
        print(f"(d) catch-up of {args.small_files:,} runs x {args.lines // args.small_files:,} "
              f"lines, `python -m app ingest --once`, median of {args.runs}: {many_s:.2f} s "
              f"(peak RSS {max(peak for _, peak in many):.0f} MB); one log of {args.lines:,} "
              f"lines {ours_s:.2f} s; ratio {many_s / ours_s:.2f} (target <= 3)")
    if not theirs:
        return
    theirs_s = statistics.median(theirs)
    print(f"(a) catch-up, whole processes, median of {args.runs}: `python -m app ingest --once` "
          f"{ours_s:.2f} s ({args.lines / ours_s:,.0f} rows/s); DuckDB read_json into a file "
          f"{theirs_s:.2f} s; ratio {theirs_s / ours_s:.2f} (target >= 0.8); the first run, "
          f"compiling the app's modules, {cold:.2f} s")
    if delays is not None:
        print(f"(b) append-to-SELECT latency at 1,000 lines/s over {len(delays):,} lines: "
              f"p50 {np.percentile(delays, 50):.0f} ms, p99 {np.percentile(delays, 99):.0f} ms "
              f"(target p99 <= 300 ms)")
    print(f"(c) peak RSS of the ingest process: {max(peaks):.0f} MB (target <= 400 MB)")


if __name__ == "__main__":
    main()
