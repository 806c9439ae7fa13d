"""`make demo`: live training watched in the browser at http://127.0.0.1:8501.

Two runs are written into LOGDIR while the monitor serves it:
- the bundled trainer's ``demo`` preset, really training (blocking checkpoints on throttled
  storage stall it; epoch boundaries rebuild its length-bucketed batches);
- the seed incident (samples/seed-cliff) re-played 60 times faster than it happened, so the
  incidents and their causes show up within minutes.

The app only starts the trainer as a separate program; it never imports it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from app import settings as settings_mod
from app.server.serve import serve

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "seed-cliff"
SPEED = 60.0


def demo(logdir: Path, port: int) -> int:
    logdir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    writers = [
        subprocess.Popen([sys.executable, "-m", "trainer", "--out", str(logdir / f"demo-{stamp}"),
                          "--preset", "demo", "--progress=off"], cwd=ROOT),
        subprocess.Popen([sys.executable, "-m", "app", "replay", str(SAMPLE), "--to",
                          str(logdir / f"seed-replay-{stamp}"), "--speed", str(SPEED)], cwd=ROOT),
    ]
    print(f"cliffwatch demo: training into {logdir}/demo-{stamp} and re-playing the seed "
          f"incident at {SPEED:g}x; open http://127.0.0.1:{port}", file=sys.stderr)
    try:
        serve(logdir, None, "127.0.0.1", port, False, settings_mod.resolve())
    finally:
        for writer in writers:
            writer.terminate()
        for writer in writers:
            writer.wait(timeout=10)
    return 0
