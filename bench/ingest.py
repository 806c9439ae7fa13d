"""Ingest benchmark (backbone issue). Prints, measured in one run:

(a) catch-up ingest rows/s of a 1,000,000-line log with the seed's fields, divided by DuckDB's
    own bulk ``read_json`` rows/s on the same file (target >= 0.7);
(b) latency from a line's append to its visibility in SELECT while a writer appends 1,000
    lines/s, p50 and p99 (target p99 <= 300 ms);
(c) peak RSS of the ingesting process during the catch-up (target <= 400 MB).

    python bench/ingest.py [--lines 1000000] [--latency-seconds 10]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
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


def duckdb_bulk(path: Path, workdir: Path) -> float:
    con = duckdb.connect(str(workdir / "yardstick.duckdb"))
    started = time.perf_counter()
    con.execute("CREATE TABLE t AS SELECT * FROM read_json($p, format = 'newline_delimited')",
                {"p": str(path)})
    elapsed = time.perf_counter() - started
    rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
    con.close()
    return rows / elapsed


def catch_up_child(logdir: Path) -> None:
    """Runs in a child process so its peak RSS is the ingest's alone."""
    with Monitor.open(logdir, settings_mod.resolve()) as monitor:
        started = time.perf_counter()
        rows = monitor.tailer.catch_up()
        elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": rows, "seconds": elapsed, "peak_rss_mb": peak_mb}))


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
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--child", type=Path)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    if args.child:
        return catch_up_child(args.child)
    if args.write:
        return write_paced(args.write, args.latency_seconds)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log = work / "logs" / "bench" / "metrics.jsonl"
        generate(log, args.lines)
        size_mb = log.stat().st_size / 1e6
        bulk = duckdb_bulk(log, work)
        child = subprocess.run([sys.executable, __file__, "--child", str(log.parent.parent)],
                               capture_output=True, text=True, check=True)
        catch = json.loads(child.stdout.strip().splitlines()[-1])
        ours = catch["rows"] / catch["seconds"]
        delays = np.array(latency(work, args.latency_seconds)) * 1000
    print(f"log: {args.lines:,} lines, {size_mb:.0f} MB, seed fields")
    print(f"(a) catch-up ingest {ours:,.0f} rows/s; DuckDB read_json {bulk:,.0f} rows/s; "
          f"ratio {ours / bulk:.2f} (target >= 0.7)")
    print(f"(b) append-to-SELECT latency at 1,000 lines/s over {len(delays):,} lines: "
          f"p50 {np.percentile(delays, 50):.0f} ms, p99 {np.percentile(delays, 99):.0f} ms "
          f"(target p99 <= 300 ms)")
    print(f"(c) peak RSS of the ingesting process: {catch['peak_rss_mb']:.0f} MB "
          f"(target <= 400 MB)")


if __name__ == "__main__":
    main()
