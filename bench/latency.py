"""Keep-alive latency of the server (issue 23): one client connection, ``--requests``
sequential GETs, median and p99 per client, for a server as it runs today and for one
without TCP_NODELAY on the connections it accepts (app/server/serve.py nodelay_sockets; the
"before" of the fix), on an empty log folder. Without it each answer's body waits for the
client's delayed ACK of its headers: about 40 ms a request, whoever the client is.

    python bench/latency.py [--requests 50]

Prints one line per server, client and path (figures of an idle machine are in README.md)::

    nodelay    http.client  /api/health      median    1.9 ms  p99    4.1 ms
    without    http.client  /api/health      median   42.0 ms  p99   44.3 ms
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fleet import free_port, percentile  # noqa: E402

# `python -m app serve ...` with the fix taken out: the figure before it
WITHOUT = ("import runpy, sys; from app.server import serve; "
           "serve.nodelay_sockets = lambda: None; "
           "sys.argv[0] = 'app'; runpy.run_module('app', run_name='__main__')")
PATHS = ("/api/health", "/_stcore/health")  # ours, and Streamlit's own (no handler work)


def start(logdir: Path, nodelay: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    head = ["-m", "app"] if nodelay else ["-c", WITHOUT]
    log = open(logdir.parent / f"server-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, *head, "serve", "--logdir", str(logdir),
                             "--port", str(port)], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(Path(log.name).read_text())
        time.sleep(0.2)
    raise SystemExit("server did not answer in 120 s")


def with_http_client(url: str, path: str, requests: int) -> list[float]:
    host, port = url.rsplit("/", 1)[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        connection.request("GET", path)
        connection.getresponse().read()
        times.append(time.perf_counter() - started)
    connection.close()
    return times


def with_httpx(url: str, path: str, requests: int) -> list[float]:
    times = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(requests):
            started = time.perf_counter()
            client.get(path)
            times.append(time.perf_counter() - started)
    return times


def measure(label: str, url: str, requests: int) -> None:
    for client, run in (("http.client", with_http_client), ("httpx", with_httpx)):
        for path in PATHS:
            run(url, path, 3)  # a warm connection, as a client that polls has
            times = [t * 1e3 for t in run(url, path, requests)]
            print(f"{label:<10} {client:<12} {path:<16} median {statistics.median(times):6.1f}"
                  f" ms  p99 {percentile(times, 99):6.1f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        logdir.mkdir()
        for label, nodelay in (("nodelay", True), ("without", False)):
            proc, url = start(logdir, nodelay)
            try:
                measure(label, url, args.requests)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
