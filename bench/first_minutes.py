"""The first minutes' waits (issue 20, items 14 and 16), measured against the real server:

- a second `serve` on a served folder: seconds until it says where the folder is served
  (issue: a traceback after about 15 s);
- Ctrl-C (SIGINT) on an idle `serve` of the seed: seconds until the process is gone
  (issue: 2-9 s, with no message).

    python bench/first_minutes.py
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import SAMPLES, Server, free_port  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff")
        server = Server(logs)
        start = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "app", "serve", "--logdir", str(logs),
                                 "--port", str(free_port())], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        told = time.monotonic() - start
        print(f"second serve: exit {second.returncode} after {told:.2f} s: "
              f"{second.stderr.strip()[:120]}")
        time.sleep(2)  # idle
        start = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        code = server.proc.wait(timeout=60)
        print(f"Ctrl-C on serve: exit {code} after {time.monotonic() - start:.2f} s")
        server.log.close()


if __name__ == "__main__":
    main()
