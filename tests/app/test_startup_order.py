"""`serve` starts reading the logs before the web stack is imported (app/server/catchup.py,
issue 23): the first catch-up runs in its own thread while Streamlit, pandas and the other
workers import, and the server answers once it is done, as before. How much sooner is
bench/vs_tensorboard.py's figure; these tests hold the order and what it must not cost."""

from __future__ import annotations

import json
import re

from tests.conftest import Server, run_cli

LINES = 3000
# Runs the real `python -m app serve`, recording the threads started before Streamlit's first
# import, and holding `serve.build` (where the web stack is imported) until the catch-up thread
# has ended: the logs must be read with no part of the web stack imported, and the server must
# still start and serve. The wait is not in the import hook: Python holds its global import
# lock around a finder's find_spec, and a catch-up that imports (pyarrow's first array imports
# pandas) would wait for the hook that waits for it.
WATCHED = """
import runpy, sys, threading
started = []
_start = threading.Thread.start
def start(self):
    started.append(self.name)
    _start(self)
threading.Thread.start = start
class SeeStreamlit:
    def find_spec(self, name, path=None, target=None):
        if name == "streamlit":
            sys.meta_path.remove(self)
            print("threads before streamlit:", ",".join(started), flush=True)
        return None
sys.meta_path.insert(0, SeeStreamlit())
from app.server import serve
_build = serve.build
def build(*args, **kwargs):
    for thread in threading.enumerate():
        if thread.name == "cliffwatch-catch-up":
            thread.join(60)
    print("streamlit imported before the catch-up ended:", "streamlit" in sys.modules,
          flush=True)
    return _build(*args, **kwargs)
serve.build = build
runpy.run_module("app", run_name="__main__")
"""


def write_log(logdir, lines: int = LINES) -> None:
    run = logdir / "run-1"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "loss": 1.0 / (step + 1)}) + "\n" for step in range(lines)))


def test_the_logs_are_read_before_streamlit_is_imported(tmp_path):
    logdir = tmp_path / "logs"
    write_log(logdir)
    server = Server(logdir, head=("-c", WATCHED))
    try:
        answer = server.sql("SELECT count(*), max(step) FROM metrics").json()
    finally:
        server.stop()
    assert answer["rows"] == [[LINES, LINES - 1]]
    log = (tmp_path / f"server-{server.port}.log").read_text()
    before = re.search(r"threads before streamlit: (.*)", log).group(1).split(",")
    assert "cliffwatch-catch-up" in before
    assert "streamlit imported before the catch-up ended: False" in log


def test_a_rules_mistake_found_during_the_catch_up_stops_serve_and_keeps_each_line_once(
        tmp_path):
    """The rules are checked while the first catch-up runs: the mistake still stops `serve`
    with its message before any URL, once the tick has committed and the database is closed;
    the lines read meanwhile are stored, once."""
    logdir = tmp_path / "logs"
    write_log(logdir)
    (logdir / "alerts.toml").write_text('[[rule]]\nname = "x"\ntype = "no-such-type"\n')
    served = run_cli("serve", "--logdir", str(logdir), "--port", "0", timeout=120)
    assert served.returncode == 2
    assert "no-such-type" in served.stderr and "dashboard and API at" not in served.stderr
    again = run_cli("ingest", "--logdir", str(logdir), "--once")
    assert again.returncode == 0, again.stderr
    assert "ingested 0 rows" in again.stdout  # the serve's catch-up stored them
    counted = run_cli("sql", "SELECT count(*) AS n, count(DISTINCT step) AS steps FROM metrics",
                      "--logdir", str(logdir), "--format", "csv")
    assert counted.stdout.split() == ["n,steps", f"{LINES},{LINES}"]
