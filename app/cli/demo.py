"""`make demo`: live training watched in the browser at http://127.0.0.1:8501.

Two runs are written into LOGDIR while the monitor serves it:
- ``demo``: the bundled trainer's ``demo`` preset, really training (blocking checkpoints on
  throttled storage stall it; epoch boundaries rebuild its length-bucketed batches);
- ``seed-replay``: the seed incident (samples/seed-cliff) re-played 60 times faster than it
  happened, so the incidents and their causes show up within minutes.

Those are the names the README's examples use (``WHERE run = 'demo'``, ``diagnose runs/demo``),
so they work as printed; a demo started again on the same LOGDIR writes ``demo-2``,
``seed-replay-2`` (and says so), as appending to the old folders would make a resumed run.
The trainer needs torch (``pip install ".[trainer]"``): without it the demo says so before
starting anything. A writer that ends is reaped at once and its end is said.

The app only starts the trainer as a separate program; it never imports it. Both writers end
with the demo: Ctrl-C, SIGTERM and SIGHUP stop them before the demo exits, and on Linux the
kernel stops them if the demo dies without a word (SIGKILL, a crash): PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import settings as settings_mod
from ..command import COMMAND
from ..errors import CliffwatchError

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "seed-cliff"
SPEED = 60.0


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_WAIT_S = 10.0
STOPPING = threading.Event()  # the demo is ending: a writer's end is no news


def demo(logdir: Path, port: int) -> int:
    need_torch()
    from ..server.serve import serve  # after the check: Streamlit takes a second to import

    logdir = logdir.resolve()  # its writers run in ROOT, not in the caller's folder
    logdir.mkdir(parents=True, exist_ok=True)
    trained, replayed = fresh(logdir, "demo"), fresh(logdir, "seed-replay")
    _stop_on_signals()
    writers = []
    try:
        writers.append(_start([sys.executable, "-m", "trainer", "--out", str(trained),
                               "--preset", "demo", "--progress=off"],
                              f"the trainer ({trained.name})"))
        writers.append(_start([sys.executable, "-m", "app", "replay", str(SAMPLE), "--to",
                               str(replayed), "--speed", str(SPEED)],
                              f"the seed replay ({replayed.name})"))
        print(f"cliffwatch demo: training into {trained} (run {trained.name!r}) and re-playing "
              f"the seed incident at {SPEED:g}x into {replayed}; open http://127.0.0.1:{port}",
              file=sys.stderr)
        serve(logdir, None, "127.0.0.1", port, False, settings_mod.resolve())
    finally:
        _stop(writers)
    return 0


def need_torch() -> None:
    """The trainer child needs torch; a plain ``pip install .`` has none, and the child would
    die with a raw ModuleNotFoundError while the demo went on serving the replay alone."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise CliffwatchError(
            "the demo trains the bundled trainer, which needs torch, and this Python has none: "
            'install it with `pip install ".[trainer]"` (from the checkout; `make demo` does it '
            f"for you), then run the demo again. Without torch, `{COMMAND} replay "
            "samples/seed-cliff --to runs/seed --speed 60` and `serve --logdir runs` show the "
            "seed incident")


def fresh(logdir: Path, name: str) -> Path:
    """LOGDIR/NAME, or NAME-2, NAME-3, ... where an earlier demo left that folder."""
    path, number = logdir / name, 1
    while path.exists():
        number += 1
        path = logdir / f"{name}-{number}"
    return path


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


def _start(argv: list[str], what: str) -> subprocess.Popen:
    # its own process group, so the terminal's Ctrl-C reaches the demo alone, which then
    # stops the whole group (the writer and anything it started)
    writer = subprocess.Popen(argv, cwd=ROOT, process_group=0,
                              preexec_fn=_die_with(os.getpid()))
    threading.Thread(target=reap, args=(writer, what), daemon=True,
                     name=f"reap-{writer.pid}").start()
    return writer


def reap(writer: subprocess.Popen, what: str) -> None:
    """Wait for a writer in the background: one that ends is reaped at once (no <defunct>
    child until Ctrl-C) and its end is said, a failure with where to look."""
    code = writer.wait()
    if STOPPING.is_set():
        return  # stopped by the demo's own end: nothing to say
    if code == 0:
        print(f"cliffwatch demo: {what} finished; the dashboard keeps serving it",
              file=sys.stderr)
    else:
        print(f"cliffwatch demo: {what} exited with status {code} (its error is above)",
              file=sys.stderr)


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
    STOPPING.set()
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
