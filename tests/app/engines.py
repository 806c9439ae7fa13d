"""The engines fleets already run (Prometheus, Alertmanager), as the tests find and start them:
Debian's packages, never a download. A missing binary skips its tests with the apt-get line
that installs it, or fails them where CLIFFWATCH_REQUIRE_ENGINES=1 (CI, .ci/run)::

    binary = engine("prometheus")            # "/usr/bin/prometheus", or skip/fail
    with alertmanager(tmp_path, CONFIG) as am:
        httpx.get(am.url + "/api/v2/alerts")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, stop_process


def engine(binary: str) -> str:
    """The path of an engine's binary (its Debian package has the same name)."""
    path = shutil.which(binary) or shutil.which(binary, path="/usr/bin:/usr/sbin")
    if path:
        return path
    message = (f"{binary} is not installed; install Debian's package: "
               f"sudo apt-get install {Path(binary).name}")
    if os.environ.get("CLIFFWATCH_REQUIRE_ENGINES") == "1":
        pytest.fail(message + " (CLIFFWATCH_REQUIRE_ENGINES=1 requires it)")
    pytest.skip(message)


@dataclass
class Alertmanager:
    url: str  # http://127.0.0.1:PORT
    log: Path
    proc: subprocess.Popen

    def alerts(self, **params) -> list[dict]:
        """GET /api/v2/alerts (active ones unless the params say otherwise)."""
        return httpx.get(self.url + "/api/v2/alerts", params=params, timeout=5).json()


@contextlib.contextmanager
def alertmanager(workdir: Path, config: str, timeout: float = 20.0):
    """A real Alertmanager on 127.0.0.1 with this YAML config, clustering off."""
    with _started("prometheus-alertmanager", workdir, config, timeout, "--storage.path",
                  "--cluster.listen-address=") as (url, log, proc):
        yield Alertmanager(url, log, proc)


@dataclass
class Prometheus:
    url: str  # http://127.0.0.1:PORT
    log: Path
    proc: subprocess.Popen

    def query(self, promql: str) -> list[dict]:
        """The instant vector a PromQL query gives now (/api/v1/query), [] while none."""
        reply = httpx.get(self.url + "/api/v1/query", params={"query": promql}, timeout=5)
        return reply.json()["data"]["result"]


@contextlib.contextmanager
def prometheus(workdir: Path, config: str, timeout: float = 20.0):
    """A real Prometheus on 127.0.0.1 with this YAML config and its own storage."""
    with _started("prometheus", workdir, config, timeout, "--storage.tsdb.path") as started:
        yield Prometheus(*started)


@contextlib.contextmanager
def _started(binary: str, workdir: Path, config: str, timeout: float, storage: str,
             *extra: str):
    """Start an engine with ``config`` and storage in ``workdir``; yields (url, log, process)
    once it answers /-/ready, and stops it afterwards."""
    path = engine(binary)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yml").write_text(config)
    port, log = free_port(), workdir / f"{binary}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [path, f"--config.file={workdir / 'config.yml'}", f"{storage}={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", *extra],
            stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not _answers(proc, url + "/-/ready", log):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{binary} not ready in {timeout} s: {log.read_text()}")
            time.sleep(0.1)
        yield url, log, proc
    finally:
        stop_process(proc)


def _answers(proc: subprocess.Popen, url: str, log: Path) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"{Path(proc.args[0]).name} exited: {log.read_text()}")
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=1).status_code == 200
    return False
