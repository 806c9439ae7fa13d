"""Start to first chart, side by side with TensorBoard (issue 23). Prints:

(a) the reader alone: ``tfevents.read`` of the event file to the columns the store is
    handed (``columnar.parsed``), in this process (the goal: 1M events in under a second);
(b) whole processes, alternating, ``--runs`` times each: TensorBoard on its event file, and
    cliffwatch (``python -m app serve``, a fresh database each time) on the same scalars as
    JSONL and as that event file. The clock runs from the process's start until loss through
    the last step is served: TensorBoard's HTTP scalars API (``/data/plugin/scalars/scalars``,
    whose sample always keeps the last point) or cliffwatch's ``POST /api/sql``;
(c) each time, the medians and the ratio TensorBoard / cliffwatch for both formats (the
    goal: >= 1.0).

    python bench/vs_tensorboard.py [--steps 1000000] [--runs 3] [--tensorboard PATH]

The data: ``--steps`` steps of loss, lr and grad_norm; in the event file one Event a step
holding the three (``--per-event 1``: one Event a scalar, as tensorboardX's add_scalar
writes them). TensorBoard is a bench-only dependency (requirements-bench.txt), never the
monitor's: ``--tensorboard`` names its executable where it lives in another environment.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.ingest import columnar  # noqa: E402
from app.ingest.formats import tfevents, tfrecord  # noqa: E402
from bench.fleet import free_port  # noqa: E402

TAGS = ("loss", "lr", "grad_norm")
RUN = "run-1"
SQL = "SELECT max(step) FROM metrics WHERE loss IS NOT NULL"


def values(rng: random.Random) -> tuple[float, float, float]:
    return 2.5 * rng.random(), 3e-4, rng.random()


def write_jsonl(path: Path, steps: int) -> None:
    rng = random.Random(0)
    with path.open("w") as handle:
        for start in range(0, steps, 10_000):
            lines = []
            for step in range(start, min(steps, start + 10_000)):
                loss, lr, grad_norm = values(rng)
                lines.append(json.dumps({"step": step, "time": 1.7e9 + step * 0.01,
                                         "loss": loss, "lr": lr, "grad_norm": grad_norm}))
            handle.write("\n".join(lines) + "\n")


def write_tfevents(path: Path, steps: int, per_event: int) -> None:
    """The same scalars as TFRecords of Event protobufs (TensorFlow's field numbers), with
    the file_version record a writer starts with."""
    rng = random.Random(0)
    version = b"brain.Event:2"  # Event.file_version (field 3), which tfevents.Event leaves out
    records = [_frame(b"\x09" + struct.pack("<d", 1.7e9) + bytes([0x1A, len(version)]) + version)]
    with path.open("wb") as handle:
        for step in range(steps):
            scalars = list(zip(TAGS, values(rng), strict=True))
            for group in ([scalars] if per_event == len(TAGS) else [[s] for s in scalars]):
                event = tfevents.Event(wall_time=1.7e9 + step * 0.01, step=step)
                for tag, number in group:
                    event.summary.value.add(tag=tag, simple_value=number)
                records.append(_record(event))
            if len(records) >= 30_000:
                handle.write(b"".join(records))
                records = []
        handle.write(b"".join(records))


def _record(event) -> bytes:
    return _frame(event.SerializeToString())


def _frame(body: bytes) -> bytes:
    head = struct.pack("<Q", len(body))
    return (head + struct.pack("<I", tfrecord.masked_crc(head)) + body
            + struct.pack("<I", tfrecord.masked_crc(body)))


def reader(path: Path) -> None:
    """The event file to what the store is handed: its columns (ingest/columnar.py), the
    checksums checked. pyarrow is imported first, as the monitor has by then."""
    import pyarrow  # noqa: F401

    data = path.read_bytes()
    wall, cpu = time.perf_counter(), time.process_time()
    got = tfevents.read(data, 0, final=True)
    parsed = columnar.parsed(got, first=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    events = len(tfrecord.scan(data, 0)[0])
    print(f"(a) reader: {events:,} events ({len(data) / 1e6:.0f} MB) -> {parsed.rows.num_rows:,} "
          f"rows in {wall:.2f} s ({cpu:.2f} s CPU); {len(parsed.problems)} problems", flush=True)


def served_by_tensorboard(url: str, last: int) -> bool:
    response = httpx.get(f"{url}/data/plugin/scalars/scalars",
                         params={"run": RUN, "tag": "loss"}, timeout=30)
    points = response.json() if response.status_code == 200 else []
    return bool(points) and points[-1][1] == last


def served_by_cliffwatch(url: str, last: int) -> bool:
    response = httpx.post(f"{url}/api/sql", json={"sql": SQL}, timeout=30)
    return response.status_code == 200 and response.json()["rows"] == [[last]]


def clock(command: list[str], url: str, served, last: int, log: Path, limit: float) -> float:
    """Seconds from starting ``command`` until ``served(url, last)``."""
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            while time.perf_counter() - started < limit:
                try:
                    if served(url, last):
                        return time.perf_counter() - started
                except (httpx.HTTPError, ValueError, KeyError, IndexError):
                    pass
                if proc.poll() is not None:
                    raise SystemExit(f"{command[0]} exited: {log.read_text()[-2000:]}")
                time.sleep(0.02)
            raise SystemExit(f"not served within {limit:.0f} s: {log.read_text()[-2000:]}")
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def tensorboard_run(tensorboard: str, logdir: Path, last: int, work: Path, limit: float):
    port = free_port()
    command = [tensorboard, "--logdir", str(logdir), "--port", str(port), "--host",
               "127.0.0.1"]
    return clock(command, f"http://127.0.0.1:{port}", served_by_tensorboard, last,
                 work / "tensorboard.log", limit)


def cliffwatch_run(logdir: Path, last: int, work: Path, limit: float) -> float:
    port = free_port()
    db = work / "cliffwatch.duckdb"
    for stale in work.glob("cliffwatch.duckdb*"):
        stale.unlink()
    command = [sys.executable, "-m", "app", "serve", "--logdir", str(logdir), "--db",
               str(db), "--port", str(port)]
    return clock(command, f"http://127.0.0.1:{port}", served_by_cliffwatch, last,
                 work / "cliffwatch.log", limit)


def find_tensorboard(given: str | None) -> str:
    found = given or shutil.which("tensorboard") or shutil.which(
        "tensorboard", path=str(Path(sys.executable).parent))
    if not found:
        raise SystemExit("no tensorboard executable: pip install -r requirements-bench.txt "
                         "(into this environment or another), or pass --tensorboard PATH")
    return found


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-event", type=int, choices=(1, len(TAGS)), default=len(TAGS))
    parser.add_argument("--tensorboard", help="TensorBoard's executable (default: on PATH)")
    parser.add_argument("--limit", type=float, default=600, help="seconds a process may take")
    args = parser.parse_args()
    tensorboard = find_tensorboard(args.tensorboard)
    last = args.steps - 1
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        logs = {"tfevents": base / "tb" / RUN, "jsonl": base / "jsonl" / RUN}
        for folder in logs.values():
            folder.mkdir(parents=True)
        events = logs["tfevents"] / "events.out.tfevents.1700000000.bench"
        write_tfevents(events, args.steps, args.per_event)
        write_jsonl(logs["jsonl"] / "metrics.jsonl", args.steps)
        reader(events)
        times: dict[str, list[float]] = {"tensorboard": [], "jsonl": [], "tfevents": []}
        print(f"(b) {args.steps:,} steps x {len(TAGS)} scalars; load average {load()}",
              flush=True)
        for attempt in range(1, args.runs + 1):
            times["tensorboard"].append(tensorboard_run(tensorboard, logs["tfevents"].parent,
                                                        last, base, args.limit))
            for fmt in ("jsonl", "tfevents"):
                times[fmt].append(cliffwatch_run(logs[fmt].parent, last, base, args.limit))
            print(f"    run {attempt}: TensorBoard {times['tensorboard'][-1]:.2f} s, cliffwatch"
                  f" on JSONL {times['jsonl'][-1]:.2f} s, on the event file "
                  f"{times['tfevents'][-1]:.2f} s", flush=True)
        report(times, events, logs["jsonl"] / "metrics.jsonl")


def report(times: dict[str, list[float]], events: Path, jsonl: Path) -> None:
    tb = statistics.median(times["tensorboard"])
    print(f"(c) medians: TensorBoard {tb:.2f} s ({events.stat().st_size / 1e6:.0f} MB event "
          f"file); load average {load()}")
    for fmt, size in (("jsonl", jsonl.stat().st_size), ("tfevents", events.stat().st_size)):
        ours = statistics.median(times[fmt])
        print(f"    cliffwatch on {fmt} ({size / 1e6:.0f} MB): {ours:.2f} s; TensorBoard / "
              f"cliffwatch = {tb / ours:.2f} (goal >= 1.0)")
    print(f"    cpus {os.cpu_count()}")


if __name__ == "__main__":
    main()
