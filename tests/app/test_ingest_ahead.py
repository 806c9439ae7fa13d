"""Big TensorBoard files decoded ahead in a process of their own (app/ingest/formats/ahead.py)
give the tailer the very answers it would have decoded itself: the same scalars, rows,
problems and consumed bytes, for a file's first read and the one after; bytes that changed
since the process read them, a process that found nothing, or an answer that is not whole
are decoded in place. A first `serve` stores what `ingest --once` stores, and leaves no file
of its own behind. The processes and files here are real (tensorboardX writes the logs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from tensorboardX import SummaryWriter

from app.ingest.formats import ahead, tfevents
from tests.app.test_formats_tfevents import corrupt, event_file, frames
from tests.app.test_tfevents_columnar import runs
from tests.conftest import ROOT, free_port, run_cli

CHUNK = 40_000  # a.tfevents (the biggest) takes three reads, b two, c one


def decoded_here(data: bytes, base: int) -> tfevents.Read:
    tfevents._LAST.held = None
    return tfevents.decoded(data, base)


def same(got: tfevents.Read, want: tfevents.Read) -> bool:
    arrays = ("offset", "step", "time", "tag", "value")
    return (all(np.array_equal(getattr(got.found, a), getattr(want.found, a), equal_nan=True)
                for a in arrays) and got.found.tags == want.found.tags
            and np.array_equal(got.groups, want.groups) and got.problems == want.problems
            and got.consumed == want.consumed)


def tailer_reads(data: bytes, count: int) -> list[tuple[int, bytes]]:
    """The reads the tailer makes of a settled file: CHUNK bytes from where the last ended."""
    reads, base = [], 0
    while base < len(data) and len(reads) < count:
        piece = data[base:base + CHUNK]
        reads.append((base, piece))
        base += decoded_here(piece, base).consumed
    return reads


@pytest.fixture
def files(tmp_path) -> tuple[Path, dict[str, bytes]]:
    logs = tmp_path / "logs"
    written = runs(logs)
    for name, data in written.items():  # a's corrupt record was made in memory
        event_file(logs / name).write_bytes(data)
    assert len(written["a"]) > 2 * CHUNK and CHUNK < len(written["b"]) < 2 * CHUNK, \
        {k: len(v) for k, v in written.items()}
    return logs, written


@pytest.fixture
def reader():
    yield ahead
    folder = ahead._RUNNING.folder if ahead._RUNNING else None
    ahead.finish()
    assert folder is None or not folder.exists()  # its files go with it


def test_the_two_biggest_files_first_two_reads_are_answered_as_decoded_here(files, reader):
    logs, written = files
    reader.start(logs, CHUNK, least=1)
    for name, expected in (("a", 2), ("b", 2), ("c", 0)):  # c: the third file is not read
        for base, piece in tailer_reads(written[name], 3):
            got = reader.take(piece, base)
            if expected:
                assert got is not None and same(got, decoded_here(piece, base)), (name, base)
                expected -= 1
            else:
                assert got is None, (name, base)


def test_the_corrupt_record_decoded_ahead_is_the_same_problem(files, reader):
    logs, written = files
    reader.start(logs, CHUNK, least=1)
    (base, piece), *_ = tailer_reads(written["a"], 1)
    got = tfevents.read(piece, base, final=True)  # through ahead: the tailer's own call
    assert [p.severity for p in got.problems] == ["error"]
    assert same(got, decoded_here(piece, base))


def test_bytes_changed_since_the_process_read_them_are_decoded_here(files, reader):
    logs, written = files
    reader.start(logs, CHUNK, least=1)
    reader._RUNNING.process.wait(timeout=60)
    piece = written["a"][:CHUNK]
    changed = corrupt(piece, frames(piece)[-8] + 14)  # the same length, other bytes
    assert reader.take(changed, 0) is None
    got = tfevents.read(changed, 0, final=True)
    assert same(got, decoded_here(changed, 0))
    assert frames(piece)[-8] in [p.offset for p in got.problems]
    grown = written["a"][:CHUNK - 1]  # another length: not asked about at all
    assert reader.take(grown, 0) is None


def test_an_answer_that_is_not_whole_is_decoded_here(files, reader):
    logs, written = files
    reader.start(logs, CHUNK, least=1)
    reader._RUNNING.process.wait(timeout=60)
    piece = written["a"][:CHUNK]
    step = reader._RUNNING.folder / f"0-{CHUNK}-{google_crc32c.value(piece)}.step"
    step.write_bytes(step.read_bytes()[:-8])  # a's first read: its steps cut short
    if reader.take(written["b"][:CHUNK], 0) is None:  # b's is whole
        pytest.fail("b's answer was not taken")
    assert reader.take(piece, 0) is None


def test_a_folder_with_no_big_file_answers_at_once(tmp_path, reader, monkeypatch):
    monkeypatch.setattr(ahead, "WAIT_S", 120.0)
    (tmp_path / "empty").mkdir()
    reader.start(tmp_path / "empty", CHUNK, least=1)
    started = time.monotonic()
    assert reader.take(b"\0" * 100, 0) is None
    assert time.monotonic() - started < 60  # the process's exit ended the wait, not WAIT_S


# `serve` up to the moment Streamlit would answer: the catch-up ran, through ahead.take
FIRST_START = """
import atexit, sys, threading
from streamlit.web.server.starlette import starlette_app
from app.ingest.formats import ahead

ahead.MIN_BYTES = 1
taken, folders = [], []
real_take = ahead.take

def take(data, base):
    if ahead._RUNNING is not None:
        folders.append(ahead._RUNNING.folder)
    got = real_take(data, base)
    taken.append(got is not None)
    return got

ahead.take = take

def imported(self, **kwargs):
    for thread in threading.enumerate():
        if thread.name == "cliffwatch-catch-up":
            thread.join(60)
    raise SystemExit(0)

starlette_app.App.run = imported
atexit.register(lambda: print("taken", sum(taken), "left", sum(f.exists() for f in folders)))
from app.cli.main import main
raise SystemExit(main(["serve", "--logdir", sys.argv[1], "--port", sys.argv[2]]))
"""


def test_a_first_serve_stores_what_ingest_once_stores_and_leaves_nothing(tmp_path):
    writer = SummaryWriter(str(tmp_path / "served" / "run"))
    for step in range(12_000):  # 1.5 MB: two reads of 1 MB (the least read: reads.chunk_of)
        writer.add_scalar("loss", 1 / (step + 1), step)
        writer.add_scalar("lr", 3e-4, step)
        if step % 500 == 0:
            writer.add_scalar("eval/loss", 2 / (step + 1), step)
    writer.close()
    shutil.copytree(tmp_path / "served", tmp_path / "once")
    done = subprocess.run([sys.executable, "-c", FIRST_START, str(tmp_path / "served"),
                           str(free_port())], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ,
                                            "CLIFFWATCH_CHUNK_BYTES": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "taken 1 left 0", done.stdout + done.stderr
    assert run_cli("ingest", "--logdir", str(tmp_path / "once"), "--once").returncode == 0
    query = ("SELECT count(*), max(step), round(sum(loss), 9), count(lr) FROM metrics "
             "WHERE step < 8000")  # the first read (the catch-up) ends inside step 8,xxx
    told = [run_cli("sql", "--logdir", str(tmp_path / name), "--format", "csv", query).stdout
            for name in ("served", "once")]
    assert told[0] == told[1] and "8000,7999" in told[0], told
    evals = [run_cli("sql", "--logdir", str(tmp_path / name), "--format", "csv",
                     "SELECT count(*) FROM evals WHERE step < 8000").stdout
             for name in ("served", "once")]
    assert evals[0] == evals[1] and evals[0].strip().endswith("16"), evals


def test_a_linked_event_file_is_not_read_ahead(files, tmp_path):
    logs, _ = files
    outside = tmp_path / "outside"
    outside.mkdir()
    target = event_file(logs / "a")
    (outside / target.name).write_bytes(target.read_bytes() * 3)  # the biggest, but a link
    (logs / "linked").mkdir()
    (logs / "linked" / target.name).symlink_to(outside / target.name)
    found = ahead.big_files(logs, 1)
    assert found and all(not path.is_symlink() for path in found), found


def test_a_stuck_reader_is_waited_for_once(tmp_path, reader, monkeypatch):
    monkeypatch.setattr(ahead, "WAIT_S", 1.0)
    data = b"\0" * 100
    folder = tmp_path / "stuck"
    folder.mkdir()
    (folder / ahead.PLAN).write_text(f"[[0, {len(data)}]]")  # planned, never made
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    monkeypatch.setattr(ahead, "_RUNNING", ahead._Ahead(stuck, folder))
    assert ahead.take(data, 0) is None
    assert stuck.poll() is not None  # killed: the next read does not wait again
    started = time.monotonic()
    assert ahead.take(data, 0) is None and time.monotonic() - started < ahead.WAIT_S
