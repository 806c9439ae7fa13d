"""`python -m app demo` never leaves its writers behind: the trainer and the replay end with the
demo on SIGTERM, SIGINT and SIGHUP, and do not outlive a SIGKILLed demo (issue 7, section 4).

The real demo runs as a subprocess; its children are found through /proc. The test only needs
them to exist, not to have trained anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, free_port, wait_for

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgid, ...]."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    fields = stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat(int(entry.name))
            if fields and fields[1] == str(pid) and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return sorted(found)


def serving(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                                    signal.SIGKILL], ids=lambda s: signal.Signals(s).name)
def test_demo_children_end_with_the_demo(tmp_path, signum):
    port = free_port()
    with open(tmp_path / "demo.log", "w") as log:
        demo = subprocess.Popen([sys.executable, "-m", "app", "demo", "--logdir",
                                 str(tmp_path / "runs"), "--port", str(port)], cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    kids: list[int] = []
    status = None
    try:
        kids = wait_for(lambda: len(children(demo.pid)) == 2 and children(demo.pid), 30)
        if signum != signal.SIGKILL:
            wait_for(lambda: serving(port), 60, 0.2)  # the signal reaches a running server
        os.kill(demo.pid, signum)
        status = demo.wait(timeout=30)
        wait_for(lambda: not any(alive(k) for k in kids), 10)
    finally:
        for pid in [demo.pid, *kids]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        demo.wait(timeout=10)
    # an orderly exit through the demo's own clean-up, not death by the signal
    assert status == {signal.SIGKILL: -signal.SIGKILL, signal.SIGINT: 130}.get(signum, 143)
