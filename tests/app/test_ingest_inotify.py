"""When an inotify limit runs out, the server says so once (the limit, the sysctl that raises
it, that polling takes over) in its log and in /api/health, and lines still arrive.

The limits are real kernel limits, not a setting of ours: the server runs in a user namespace
of its own (``unshare --user``), whose root may lower that namespace's inotify limits
(``/proc/sys/user/max_inotify_watches`` and ``max_inotify_instances``) without touching the
machine's or any other process's. Where user namespaces are not allowed, the tests skip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, Server, free_port, wait_for

LOWER = 'echo "$1" > /proc/sys/user/"$2" && shift 2 && exec "$@"'


def namespaces_allowed() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            "echo 5 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not namespaces_allowed(), reason="user namespaces are not "
                                "allowed here (unshare --user), so no inotify limit of our "
                                "own can be set")


class LimitedServer(Server):
    """The real server, in a user namespace whose inotify ``limit`` is ``value``."""

    def __init__(self, logdir: Path, limit: str, value: int):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(logdir.parent / f"server-{self.port}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "sh", "-c", LOWER, "sh", str(value),
             limit, sys.executable, "-m", "app", "serve", "--logdir", str(logdir), "--port",
             str(self.port)], cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._wait()

    def health(self) -> dict:
        return httpx.get(self.url + "/api/health", timeout=10).json()

    def steps(self, run: str) -> int:
        reply = self.sql(f"SELECT count(*) FROM metrics WHERE run = '{run}'").json()
        return reply["rows"][0][0]


@pytest.fixture
def limited():
    servers = []

    def start(logdir: Path, limit: str, value: int) -> LimitedServer:
        servers.append(LimitedServer(logdir, limit, value))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def write(path: Path, *steps: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.writelines(json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n" for s in steps)


def runs(tmp_path: Path, count: int) -> Path:
    logs = tmp_path / "logs"
    for i in range(count):
        write(logs / f"run-{i:02d}" / "metrics.jsonl", 0, 1)
    return logs


def test_watch_limit_said_once_and_polling_takes_over(tmp_path, limited):
    # 4 watches: the log directory and three folders; watchdog skips the others silently
    logs = runs(tmp_path, 10)
    server = limited(logs, "max_inotify_watches", 4)
    health = wait_for(lambda: (h := server.health())["watching"] != "inotify" and h)
    assert health["watching"] == "polling (inotify limit reached)"
    note = health["watching_note"]
    assert note.startswith("inotify watch limit reached (fs.inotify.max_user_watches is ")
    assert "; 4 in this user namespace)" in note
    assert "Polling takes over" in note
    assert "sysctl fs.inotify.max_user_watches=524288" in note
    # lines still arrive, in folders inotify never watched and in a new one
    write(logs / "run-09" / "metrics.jsonl", 2)
    write(logs / "run-new" / "metrics.jsonl", 0)
    wait_for(lambda: server.steps("run-09") == 3 and server.steps("run-new") == 1)
    log = Path(server.log.name).read_text()
    assert log.count("inotify watch limit reached") == 1, log


def test_instance_limit_said_once_and_polling_takes_over(tmp_path, limited):
    logs = runs(tmp_path, 2)
    server = limited(logs, "max_inotify_instances", 0)
    health = server.health()
    assert health["watching"] == "polling (inotify limit reached)"
    assert "fs.inotify.max_user_instances is " in health["watching_note"]
    assert "sysctl fs.inotify.max_user_instances=1024" in health["watching_note"]
    write(logs / "run-01" / "metrics.jsonl", 2)
    wait_for(lambda: server.steps("run-01") == 3)
    log = Path(server.log.name).read_text()
    assert log.count("inotify instance limit reached") == 1, log


def test_inotify_watches_every_folder_when_the_limit_allows(tmp_path, make_server):
    server = make_server(runs(tmp_path, 3))
    health = httpx.get(server.url + "/api/health", timeout=10).json()
    assert (health["watching"], health["watching_note"]) == ("inotify", None)
