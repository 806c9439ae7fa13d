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
    binary = engine("prometheus-alertmanager")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "alertmanager.yml").write_text(config)
    port, log = free_port(), workdir / "alertmanager.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [binary, f"--config.file={workdir / 'alertmanager.yml'}",
             f"--storage.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--cluster.listen-address="], stdout=out, stderr=subprocess.STDOUT)
    am = Alertmanager(f"http://127.0.0.1:{port}", log, proc)
    try:
        _wait_ready(am, timeout)
        yield am
    finally:
        stop_process(proc)


def _wait_ready(am: Alertmanager, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if am.proc.poll() is not None:
            raise RuntimeError(f"alertmanager exited: {am.log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(am.url + "/-/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"alertmanager not ready in {timeout} s: {am.log.read_text()}")


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
    binary = engine("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "prometheus.yml").write_text(config)
    port, log = free_port(), workdir / "prometheus.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [binary, f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT)
    prom = Prometheus(f"http://127.0.0.1:{port}", log, proc)
    try:
        deadline = time.monotonic() + timeout
        while not _answers(prom.proc, prom.url + "/-/ready", prom.log):
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready in {timeout} s: {log.read_text()}")
            time.sleep(0.1)
        yield prom
    finally:
        stop_process(proc)


def _answers(proc: subprocess.Popen, url: str, log: Path) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"{Path(proc.args[0]).name} exited: {log.read_text()}")
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=1).status_code == 200
    return False
