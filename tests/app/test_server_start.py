"""What the server does before it answers (issue 23: start to first chart). Python's imports
hold the GIL, so every module the server's thread imports before it serves is on the clock:
pandas (a third of a second of one core) and httpx (a tenth) are imported by the threads that
use them, the live diagnosis, the alert rules and the webhook senders, once the server
answers. The figures are bench/vs_tensorboard.py's; these tests keep the imports off that path.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

from app.server import serve
from tests.conftest import ROOT, free_port

# `serve` itself, up to the moment Streamlit would start answering: there it waits for the
# catch-up, says what was imported, and stops
UP_TO_RUN = """
import sys, threading
from streamlit.web.server.starlette import starlette_app

def imported(self, **kwargs):
    for thread in threading.enumerate():  # the database closes once no statement runs on it
        if thread.name == "cliffwatch-catch-up":
            thread.join(60)
    print(sorted(m for m in ("pandas", "httpx", "app.diagnose.detect", "app.alerts.engine")
                 if m in sys.modules))
    raise SystemExit(0)

starlette_app.App.run = imported
from app.cli.main import main
raise SystemExit(main(["serve", "--logdir", sys.argv[1], "--port", sys.argv[2]]))
"""


def test_the_server_is_ready_to_answer_without_pandas_or_httpx(tmp_path):
    # a JSONL log, caught up meanwhile: big enough for the bulk path (chunk.MIN_BYTES), which
    # builds no Arrow array from Python objects (pyarrow's first one imports pandas)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(
        "".join(f'{{"step": {s}, "loss": {1 / (s + 1)}}}\n' for s in range(10_000)))
    done = subprocess.run([sys.executable, "-c", UP_TO_RUN, str(tmp_path), str(free_port())],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]", done.stdout + done.stderr


def test_the_component_scan_the_server_skips_is_still_streamlits(monkeypatch):
    """serve.no_component_scan replaces a method of Streamlit's: an upgrade that renames it,
    or that scans from elsewhere, would bring the scan back silently."""
    from streamlit.components.v2.component_manager import BidiComponentManager
    from streamlit.runtime import runtime

    assert "discover_and_register_components()" in inspect.getsource(runtime.Runtime.__init__)
    original = BidiComponentManager.discover_and_register_components
    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", original)
    serve.no_component_scan()
    replaced = BidiComponentManager.discover_and_register_components
    assert replaced is not original
    assert inspect.signature(replaced) == inspect.signature(original)
