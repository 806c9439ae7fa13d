"""Wide-log benchmark (issue 7, "thousands of metric names"). Prints, for a log of KEYS
distinct metric keys on each of LINES lines, ingested by one tick of a fresh monitor:
wall time until caught up, peak RSS of the ingesting process, metric columns created, rows
stored, and how many keys per row went to the overflow column ``extra_metrics``.

    python bench/wide_keys.py [--keys 5000] [--lines 200] [--memory-limit 256MB]
                              [--max-metric-columns 1000]

Each measurement runs in its own child process, so peak RSS is that ingest's alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import settings as settings_mod  # noqa: E402
from app.monitor import Monitor  # noqa: E402


def generate(path: Path, keys: int, lines: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for step in range(1, lines + 1):
            line = {"step": step} | {f"m{k:06d}": step + k / keys for k in range(keys)}
            handle.write(json.dumps(line) + "\n")


def measure(logdir: Path, memory_limit: str, cap: int) -> dict:
    """Ticks over ``logdir`` in this process until caught up; the figures as a dict."""
    settings = dataclasses.replace(settings_mod.resolve(), memory_limit=memory_limit,
                                   max_metric_columns=cap)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with Monitor.open(logdir, settings) as mon:
        mon.tailer.store.max_columns = cap  # until the tailer passes the setting on
        ticks, stored = 1, mon.tailer.tick(discover=True)
        while (added := mon.tailer.tick()) or ticks < 3:  # a big file may take a few ticks
            ticks, stored = ticks + 1, stored + added
        seconds = time.perf_counter() - started
        cur = mon.db.cursor()
        columns = [r[0] for r in cur.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'metric_rows'").fetchall()]
        rows = cur.execute("SELECT count(*) FROM metric_rows").fetchone()[0]
        errors = cur.execute("SELECT severity, reason FROM ingest_errors").fetchall()
        overflow = 0
        if "extra_metrics" in columns:
            overflow = cur.execute("SELECT max(cardinality(extra_metrics)) "
                                   "FROM metric_rows").fetchone()[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    metric_columns = [c for c in columns if c.startswith("m0")]
    return {"seconds": round(seconds, 2), "ticks": ticks, "peak_rss_mb": round(peak / 1024),
            "rss_before_mb": round(before / 1024), "metric_columns": len(metric_columns),
            "rows": rows, "overflow_keys_per_row": overflow,
            "ingest_errors": len(errors), "first_error": errors[0] if errors else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--memory-limit", default="256MB")
    parser.add_argument("--max-metric-columns", type=int,
                        default=settings_mod.resolve().max_metric_columns)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child), args.memory_limit,
                                 args.max_metric_columns)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        generate(logdir / "wide" / "metrics.jsonl", args.keys, args.lines)
        size = (logdir / "wide" / "metrics.jsonl").stat().st_size
        print(f"log: {args.keys} keys x {args.lines} lines, {size / 1e6:.1f} MB")
        out = subprocess.run([sys.executable, __file__, "--child", str(logdir),
                              "--memory-limit", args.memory_limit,
                              "--max-metric-columns", str(args.max_metric_columns)],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(out.stderr[-3000:])
            raise SystemExit(out.returncode)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        for name, value in figures.items():
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()
