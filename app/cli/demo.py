"""`make demo`: a live run written into LOGDIR while the monitor serves it on 127.0.0.1.

Until the bundled trainer is wired in, the live run is the seed incident
(samples/seed-cliff) re-played 60 times faster than it happened.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from app import settings as settings_mod
from app.server.serve import serve

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "seed-cliff"
SPEED = 60.0


def demo(logdir: Path, port: int) -> int:
    logdir.mkdir(parents=True, exist_ok=True)
    run_dir = logdir / f"seed-replay-{time.strftime('%Y%m%d-%H%M%S')}"
    writer = subprocess.Popen([sys.executable, "-m", "app", "replay", str(SAMPLE), "--to",
                               str(run_dir), "--speed", str(SPEED)])
    print(f"cliffwatch demo: re-playing {SAMPLE.name} into {run_dir} at {SPEED:g}x; open "
          f"http://127.0.0.1:{port}", file=sys.stderr)
    try:
        serve(logdir, None, "127.0.0.1", port, False, settings_mod.resolve())
    finally:
        writer.terminate()
        writer.wait(timeout=10)
    return 0
