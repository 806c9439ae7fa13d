"""``GET /metrics`` with a team's runs folder (issue 12, section 2): scrape time and size with
``--finished`` finished runs (each ends with ``run_end``, last written days ago, as a folder of
last months' runs is) and ``--live`` live ones writing 10 lines a second. Printed on the 2-core
dev machine (shared, load 8-10; 2,002,920 rows, 20,020 files)::

    10,000 finished + 10 live runs (200 lines each), ingest --once 2.7 s
    /metrics: median 104 ms, p90 173 ms over 40 scrapes; 10.1 KiB, 10 runs exported

(``ingest --once`` there only caught up a tree built before with ``--keep``.) The database is
built by ``python -m app ingest --once``; the server is the real one.

    python bench/prometheus.py [--finished 10000] [--live 10] [--lines 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import Server  # noqa: E402

DAY = 86400.0


def write_run(folder: Path, lines: int, ended: float | None) -> Path:
    """A tiny run; ``ended``: when it finished (Unix seconds; its files get that mtime)."""
    folder.mkdir(parents=True)
    metrics = folder / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "loss": 2.0 / (1 + s), "accuracy": s / lines,
                                           "tok_per_sec": 26000.0, "elapsed_s": s * 5.0}) + "\n"
                               for s in range(lines)))
    events = [{"event": "run_start", "step": 0}]
    if ended is not None:
        events.append({"event": "run_end", "step": lines - 1, "status": "completed"})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if ended is not None:
        for path in folder.iterdir():
            os.utime(path, (ended, ended))
    return metrics


def build(logdir: Path, finished: int, live: int, lines: int) -> list[Path]:
    now = time.time()
    for i in range(finished):  # finished between 1 and 90 days ago
        write_run(logdir / f"team{i % 10}" / f"run-{i:05d}", lines, now - DAY * (1 + i % 90))
    return [write_run(logdir / "live" / f"run-{i:02d}", lines, None) for i in range(live)]


def writers(files: list[Path], stop: threading.Event) -> None:
    def loop():
        step = 1_000
        while not stop.wait(0.1):
            step += 1
            for path in files:
                with path.open("a") as handle:
                    handle.write(json.dumps({"step": step, "loss": 1.0 / step,
                                             "tok_per_sec": 25000.0}) + "\n")
    threading.Thread(target=loop, daemon=True).start()


def scrape(url: str, count: int) -> tuple[list[float], bytes]:
    times, body = [], b""
    with httpx.Client(timeout=60) as client:
        for _ in range(count):
            started = time.perf_counter()
            response = client.get(url + "/metrics")
            times.append(time.perf_counter() - started)
            response.raise_for_status()
            body = response.content
            time.sleep(0.05)
    return times, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=10_000)
    parser.add_argument("--live", type=int, default=10)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--keep", type=Path,
                        help="build the tree here and keep it; a tree already there is reused")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="cw-prom-"))
    logdir = base / "runs"
    try:
        if (logdir / "live").is_dir():
            live = sorted((logdir / "live").glob("*/metrics.jsonl"))
        else:
            live = build(logdir, args.finished, args.live, args.lines)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "app", "ingest", "--once", "--logdir",
                        str(logdir)], cwd=ROOT, check=True, capture_output=True)
        print(f"{args.finished:,} finished + {args.live} live runs ({args.lines} lines each), "
              f"ingest --once {time.perf_counter() - started:.1f} s")
        server = Server(logdir)
        stop = threading.Event()
        try:
            writers(live, stop)
            time.sleep(3)
            times, body = scrape(server.url, args.scrapes)
        finally:
            stop.set()
            server.stop()
        runs = {line.split('run="', 1)[1].split('"', 1)[0] for line in body.decode().splitlines()
                if line.startswith("cliffwatch_run_step{")}
        p90 = statistics.quantiles(times, n=10)[8]
        print(f"/metrics: median {statistics.median(times) * 1000:.0f} ms, p90 {p90 * 1000:.0f} "
              f"ms over {len(times)} scrapes; {len(body) / 1024:.1f} KiB, {len(runs)} runs "
              f"exported")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
