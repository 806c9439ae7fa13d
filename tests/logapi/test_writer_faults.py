"""A full disk or a deleted run folder is said once on stderr and training goes on: a real
64 KiB tmpfs that fills up, a real folder removed under a running writer."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import cliffwatch
from cliffwatch import writer


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def whole_lines(path: Path) -> list[dict]:
    """Every line but a torn one (what a full disk cut short) must be whole JSON."""
    got = []
    for raw in path.read_text().splitlines():
        try:
            got.append(json.loads(raw))
        except ValueError:
            assert not raw.endswith("}"), raw
    return got


def test_a_full_disk_is_said_once_and_writing_resumes_when_space_is_back(small_disk, capsys):
    run = cliffwatch.Run(small_disk / "r")
    run.start(resumed=False, step=0)
    wide = {f"a_metric_with_a_long_name_{i}": 1.0e-300 for i in range(4)}
    for step in range(800):  # ~200 bytes a line: the 64 KiB fill up at ~300
        run.log(wide, step=step)
        time.sleep(writer.BURST_S)  # one line at a time, as a loop logs
    err = capsys.readouterr().err
    assert err.count("cannot write") == 1 and "No space left on device" in err
    assert "training goes on" in err
    kept = whole_lines(run.dir / "metrics.jsonl")
    assert 100 < len(kept) < 800
    (run.dir / "metrics.jsonl").unlink()  # space again; the file is gone too: started anew
    time.sleep(writer.CHECK_S)
    run.log({"loss": 0.5}, step=800)
    run.finish()
    err = capsys.readouterr().err
    assert "lines were lost" in err and "was deleted" in err
    assert [m["step"] for m in whole_lines(run.dir / "metrics.jsonl")] == [800]


def test_a_deleted_run_folder_is_said_once_and_started_again(tmp_path, capsys):
    run = cliffwatch.Run(tmp_path / "r")
    run.start(resumed=False, step=0)
    run.log({"loss": 1.0}, step=1)
    shutil.rmtree(run.dir)
    for step in range(2, 5):
        run.log({"loss": 1.0}, step=step)
        time.sleep(writer.CHECK_S / 2)
    run.finish()
    err = capsys.readouterr().err
    assert err.count("metrics.jsonl was deleted") == 1
    steps = [m["step"] for m in whole_lines(run.dir / "metrics.jsonl")]
    assert steps[-1] == 4 and 1 not in steps
    assert json.loads((run.dir / "events.jsonl").read_text().splitlines()[-1])["event"] \
        == "run_end"


def test_a_run_folder_that_cannot_be_made_is_said_and_logging_goes_on(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    run = cliffwatch.Run(tmp_path / "file" / "r")
    run.start(resumed=False, step=0)
    for step in range(100):
        run.log({"loss": 1.0}, step=step)
    run.finish()
    assert capsys.readouterr().err.count("cannot open") == 2  # metrics.jsonl, events.jsonl
