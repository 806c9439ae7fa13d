"""Shared test helpers: real DuckDB files in tmp_path, the real server as a subprocess."""

from __future__ import annotations

import compileall
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

# torch's OpenMP threads spin while they wait for work. Beside the other xdist worker on 2
# cores, a 2-thread torch op then waits out a spin of a thread that lost its core: the tiny
# target's 60 pre-training steps took 17-65 s, not 3 s. Sleeping waits change no number; the
# processes the tests start inherit it. Set before anything imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SHARED = ROOT.parent / "shared"
# Real public logs live beside the repository on our machines and CI, not in a plain clone.
needs_realdata = pytest.mark.skipif(
    not (SHARED / "realdata").is_dir(),
    reason="../shared/realdata (real public logs, see its README) is not beside this clone")


# The files that take longest, slowest first (`--durations`, 2026-12-02: a browser driving
# every page, real Hugging Face and Lightning trainers, servers started and SIGKILLed). With
# `--dist loadfile` a worker takes the next file when it is almost out of work: one of these
# taken last keeps that worker busy for a minute after the other has run out. Run first, the
# many short files fill in behind them and the two workers end together. `make test` passes
# --no-loadscope-reorder, else xdist orders files by their number of tests instead.
SLOW_FIRST = [
    "tests/app/test_dashboard_browser.py", "tests/integrations/test_hf_callback.py",
    "tests/app/test_diagnose_unread.py", "tests/integrations/test_lightning_callback.py",
    "tests/app/test_database_kept.py", "tests/integrations/test_hf_eval_stall.py",
    "tests/app/test_foreign_runs_drawn.py", "tests/trainer/test_trainer_process.py",
    "tests/app/test_ingest_saves.py", "tests/app/test_diagnose.py", "tests/test_install.py",
    "tests/app/test_reach.py", "tests/app/test_cli.py", "tests/app/test_crash_exactly_once.py",
    "tests/app/test_fleet_idle_work.py", "tests/app/test_straggler.py",
    "tests/app/test_alert_clock.py", "tests/app/test_ingest_idle.py",
]


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile our own code once, before any test starts a process. Where
    PYTHONDONTWRITEBYTECODE is set (this machine, CI's), Python never writes the .pyc it
    compiles: each of the suite's hundreds of `python -m app` and trainer processes compiled
    every module of ours it imported again (timed by hand: `ingest --once` of an empty folder
    0.64 s against 0.40 s; the server's imports 1.8-1.9 s against 1.4-1.6 s). The packages in
    the venv were compiled by pip."""
    if not hasattr(config, "workerinput"):  # xdist's controller, or a run without it
        for folder in ("app", "trainer", "cliffwatch", "bench"):
            compileall.compile_dir(ROOT / folder, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow files first, each file's tests together and in their order (a stable sort)."""
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_cli(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


class Server:
    headers: dict[str, str] | None = None  # the start-up probe's (a token's Authorization)

    def __init__(self, logdir: Path, *extra: str, headers: dict[str, str] | None = None,
                 head: tuple[str, ...] = ("-m", "app")):
        """``head``: what follows the interpreter, e.g. ``("-c", SCRIPT)`` for a script that
        watches the server's own start-up before it runs ``app``."""
        self.headers = headers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(logdir.parent / f"server-{self.port}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, *head, "serve", "--logdir", str(logdir), "--port",
             str(self.port), *extra], cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            self._wait()
        except BaseException:  # a server that never answered is not left running
            self.stop()
            raise

    def _wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {Path(self.log.name).read_text()}")
            try:
                if httpx.get(self.url + "/api/health", headers=self.headers,
                             timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("server did not start: " + Path(self.log.name).read_text())

    def sql(self, query: str) -> httpx.Response:
        return httpx.post(self.url + "/api/sql", json={"sql": query}, timeout=60)

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def make_server():
    servers = []

    def start(logdir: Path, *extra: str) -> Server:
        servers.append(Server(logdir, *extra))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05):
    """Poll until predicate() is truthy; returns its value (fails the test on timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


# Headless Chromium for the page tests: Debian's browser, never a downloaded one.
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("no /usr/bin/chromium here (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()
