"""Ad-hoc SQL limits against the real server (issue 7, section 1). Prints, measured in one run:

- server RSS before, at peak and after each big result, and how long it took:
  ``SELECT repeat('x', 10000000) FROM range(100)`` (issue: 0.2 -> 4.9 GB, 17.8 s past a 10 s
  limit), the same over 300 rows (review: 3.2 GB), ``SELECT range(40000000)`` (review: 3.66 GB,
  13.5 s) and ``SELECT range(15000000)`` (review: a 200 with 0 rows after 13 s);
- /api/health latency while two ``SELECT range(15000000) AS r`` run (review: 8.4 s);
- /api/health latency while 50 heavy /api/sql requests are in flight (issue: 9.6 s);
- server RSS growth from one 100 MB POST to /api/sql (issue: +700 MB).

    python bench/adhoc_limits.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import Server  # noqa: E402


def memory_mb(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) of a process, in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


BIG_RESULTS = [
    "SELECT repeat('x', 10000000) AS s FROM range(100)",
    "SELECT repeat('x', 10000000) AS s FROM range(300)",
    "SELECT range(40000000) AS r",
    "SELECT range(15000000) AS r",
]


def big_result(srv: Server, sql: str) -> None:
    Path(f"/proc/{srv.proc.pid}/clear_refs").write_text("5")  # peak RSS counts from here
    before = memory_mb(srv.proc.pid)
    started = time.monotonic()
    response = srv.sql(sql)
    took = time.monotonic() - started
    body = response.json()
    time.sleep(3)  # the allocator hands memory back in the background
    after = memory_mb(srv.proc.pid)
    print(f"{sql}: status {response.status_code}, {body.get('row_count')} rows "
          f"({body.get('truncated_reason') or body.get('error', '')[:60]}), "
          f"{len(response.content) / 1e6:.1f} MB answer in {took:.2f} s; server RSS "
          f"{before[0]} MB before, peak {after[1]} MB, {after[0]} MB 3 s after")


def health_during_big_lists(srv: Server, n: int = 2) -> None:
    """/api/health while ``n`` huge single values are fetched (Python conversion held the GIL)."""
    with ThreadPoolExecutor(n) as pool:
        answers = [pool.submit(srv.sql, "SELECT range(15000000) AS r") for _ in range(n)]
        time.sleep(0.2)
        waits = []
        while not all(answer.done() for answer in answers):
            begun = time.monotonic()
            httpx.get(srv.url + "/api/health", timeout=120).raise_for_status()
            waits.append(time.monotonic() - begun)
            time.sleep(0.1)
        statuses = [answer.result().status_code for answer in answers]
    print(f"/api/health during {n} concurrent SELECT range(15000000): max {max(waits):.3f} s "
          f"over {len(waits)} calls; their statuses {statuses}")


def health_under_load(srv: Server, n: int = 50) -> None:
    heavy = "SELECT count(*) FROM range(100000000) a, range(100000000) b"
    started = threading.Event()

    def post(_):
        started.set()
        return httpx.post(srv.url + "/api/sql", json={"sql": heavy}, timeout=120).status_code

    with ThreadPoolExecutor(n) as pool:
        statuses = pool.map(post, range(n))
        started.wait()
        time.sleep(1.0)
        latencies = []
        for _ in range(5):
            begun = time.monotonic()
            httpx.get(srv.url + "/api/health", timeout=120).raise_for_status()
            latencies.append(time.monotonic() - begun)
            time.sleep(0.2)
        statuses = sorted(statuses)
    counts = {s: statuses.count(s) for s in set(statuses)}
    print(f"/api/health under {n} concurrent heavy /api/sql: max {max(latencies):.3f} s, "
          f"median {sorted(latencies)[2]:.3f} s; their statuses {counts}")


def big_post(srv: Server, size: int = 100 * 1024 * 1024) -> None:
    before = memory_mb(srv.proc.pid)
    chunk = b" " * (1024 * 1024)
    try:
        response = httpx.post(srv.url + "/api/sql", content=iter([chunk] * (size // len(chunk))),
                              timeout=120)
        status = response.status_code
    except httpx.HTTPError as exc:  # the server may close the connection after refusing
        status = type(exc).__name__
    after = memory_mb(srv.proc.pid)
    print(f"100 MB POST: {status}; server RSS {before[0]} -> {after[0]} MB "
          f"(+{after[0] - before[0]} MB), peak {after[1]} MB")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        (logdir / "r").mkdir(parents=True)
        (logdir / "r" / "metrics.jsonl").write_text("".join(
            json.dumps({"step": i, "loss": 1 / (i + 1)}) + "\n" for i in range(1000)))
        srv = Server(logdir, "--sql-time-limit", "10")
        try:
            for sql in BIG_RESULTS:
                big_result(srv, sql)
            health_during_big_lists(srv)
            health_under_load(srv)
            big_post(srv)
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
