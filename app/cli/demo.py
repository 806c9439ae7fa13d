"""`make demo`: live training watched in the browser at http://127.0.0.1:8501.

Two runs are written into LOGDIR while the monitor serves it:
- the bundled trainer's ``demo`` preset, really training (blocking checkpoints on throttled
  storage stall it; epoch boundaries rebuild its length-bucketed batches);
- the seed incident (samples/seed-cliff) re-played 60 times faster than it happened, so the
  incidents and their causes show up within minutes.

The app only starts the trainer as a separate program; it never imports it. Both writers end
with the demo: Ctrl-C, SIGTERM and SIGHUP stop them before the demo exits, and on Linux the
kernel stops them if the demo dies without a word (SIGKILL, a crash): PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import settings as settings_mod
from ..server.serve import serve

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "seed-cliff"
SPEED = 60.0


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_WAIT_S = 10.0


def demo(logdir: Path, port: int) -> int:
    logdir = logdir.resolve()  # its writers run in ROOT, not in the caller's folder
    logdir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    _stop_on_signals()
    writers = []
    try:
        writers.append(_start([sys.executable, "-m", "trainer", "--out",
                               str(logdir / f"demo-{stamp}"), "--preset", "demo",
                               "--progress=off"]))
        writers.append(_start([sys.executable, "-m", "app", "replay", str(SAMPLE), "--to",
                               str(logdir / f"seed-replay-{stamp}"), "--speed", str(SPEED)]))
        print(f"cliffwatch demo: training into {logdir}/demo-{stamp} and re-playing the seed "
              f"incident at {SPEED:g}x; open http://127.0.0.1:{port}", file=sys.stderr)
        serve(logdir, None, "127.0.0.1", port, False, settings_mod.resolve())
    finally:
        _stop(writers)
    return 0


def _stop_on_signals() -> None:
    """Ctrl-C, SIGTERM and SIGHUP end the demo through its ``finally``, with the shell's
    status (130, 143). The server catches SIGINT and SIGTERM itself, shuts down cleanly and
    then raises the signal again, which lands here; a SIGHUP is turned into that same SIGTERM.
    (Left to Python's KeyboardInterrupt, a Ctrl-C once ended the demo with status 0: the
    raised-again SIGINT can meet a handler the server left behind.)"""

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, lambda *_: os.kill(os.getpid(), signal.SIGTERM))


def _start(argv: list[str]) -> subprocess.Popen:
    # its own process group, so the terminal's Ctrl-C reaches the demo alone, which then
    # stops the whole group (the writer and anything it started)
    return subprocess.Popen(argv, cwd=ROOT, process_group=0, preexec_fn=_die_with(os.getpid()))


def _die_with(parent: int):
    """A preexec_fn: the child gets SIGTERM when the demo dies, however it dies."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork, not in the child

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the demo died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _stop(writers: list[subprocess.Popen]) -> None:
    for writer in writers:
        _signal_group(writer, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    for writer in writers:
        try:
            writer.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(writer, signal.SIGKILL)
            writer.wait()


def _signal_group(writer: subprocess.Popen, signum: int) -> None:
    if writer.poll() is not None:
        return  # ended and reaped: its group id may already belong to someone else
    with contextlib.suppress(ProcessLookupError):  # ended between the two lines
        os.killpg(writer.pid, signum)
