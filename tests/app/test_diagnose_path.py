"""`diagnose L` reads L and nothing above it (issue 7, section 4): a run folder given directly is
diagnosed alone, under its own name; a sibling run and a secret beside it are never opened.

The real CLI runs on a real folder tree while inotify (watchdog) records every file opened in
the tree above L.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from watchdog.events import FileSystemEventHandler
from watchdog.observers.inotify import InotifyObserver

from tests.conftest import SAMPLES, run_cli

SECRET = '{"api_key": "hunter2"}\n'


class Opened(FileSystemEventHandler):
    def __init__(self):
        self.paths: set[Path] = set()

    def on_opened(self, event) -> None:
        self.paths.add(Path(event.src_path))


@pytest.fixture
def home(tmp_path) -> Path:
    """home/seed (the run asked about), home/sibling (another run), home/run.json (a secret
    that a run folder's parent must not give away)."""
    home = tmp_path / "home"
    shutil.copytree(SAMPLES / "seed-cliff-plain", home / "seed")
    shutil.copytree(SAMPLES / "seed-cliff-plain", home / "sibling")
    (home / "run.json").write_text(SECRET)
    return home


@pytest.mark.parametrize("keep_db", [False, True], ids=["scratch-db", "given-db"])
def test_diagnose_run_folder_reads_nothing_above_it(tmp_path, home, keep_db):
    opened = Opened()
    observer = InotifyObserver()
    observer.schedule(opened, str(home), recursive=True)
    observer.start()
    db = tmp_path / "db" / "cliffwatch.duckdb"
    try:
        time.sleep(0.2)  # the watches are in place
        done = run_cli("diagnose", str(home / "seed"), "--json",
                       *(["--db", str(db)] if keep_db else []))
        time.sleep(0.3)  # the last events arrive
    finally:
        observer.stop()
        observer.join()
    assert done.returncode == 0, done.stderr
    outside = {p for p in opened.paths if not p.is_relative_to(home / "seed")}
    assert outside == set()
    assert any(p.name == "metrics.jsonl" for p in opened.paths)  # the watch did see reads
    incidents = json.loads(done.stdout)
    assert incidents and {i["run"] for i in incidents} == {"seed"}
    if keep_db:
        stored = run_cli("sql", "SELECT DISTINCT path FROM files ORDER BY path", "--db", str(db),
                         "--format", "json")
        assert stored.returncode == 0, stored.stderr
        assert json.loads(stored.stdout) == [{"path": "metrics.jsonl"}]
        meta = run_cli("sql", "SELECT count(*) AS n FROM runs WHERE CAST(meta AS VARCHAR) LIKE "
                       "'%hunter2%'", "--db", str(db), "--format", "json")
        assert json.loads(meta.stdout) == [{"n": 0}]


def test_diagnose_log_directory_still_covers_every_run(home):
    (home / "run.json").unlink()  # else home itself holds a run and is diagnosed as one
    done = run_cli("diagnose", str(home / "sibling" / ".."), "--json")
    assert done.returncode == 0, done.stderr
    assert {"seed", "sibling"} <= {i["run"] for i in json.loads(done.stdout)}


def test_diagnose_takes_logdir_as_every_other_command_does(home):
    by_path = run_cli("diagnose", "--json", str(home / "seed"))
    by_flag = run_cli("diagnose", "--json", "--logdir", str(home / "seed"))
    assert by_flag.returncode == by_path.returncode == 0, by_flag.stderr
    assert json.loads(by_flag.stdout) == json.loads(by_path.stdout) != []
    nothing = run_cli("diagnose")
    assert nothing.returncode == 2 and "one of the arguments path --logdir" in nothing.stderr
    two = run_cli("diagnose", str(home / "seed"), "--logdir", str(home / "sibling"))
    assert two.returncode == 2 and "not allowed with argument path" in two.stderr
