"""Every place that deletes anything removes only what cliffwatch provably made (issue 18,
finding 1): the start-up sweep of scratch folders, beside the database and in /dev/shm, and
the export's clean-up of a killed export's parts. A user's folder or file with a name as close
to ours as possible survives, with what it holds; a real leftover of a killed monitor goes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.export import layout
from tests.conftest import ROOT, run_cli

SHM = Path("/dev/shm")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def killed_monitor_scratch(base: Path) -> Path:
    """A scratch folder made by the real code in a process then SIGKILLed (no clean-up)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from app.scratch import make; print(make(Path(sys.argv[1])), flush=True); "
         "time.sleep(60)", str(base)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    folder = Path(proc.stdout.readline().strip())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (folder / "0123abcd.jsonl").write_bytes(b'{"step": 1}\n')  # what a kill mid-read leaves
    return folder


def users_folders(base: Path, tag: str) -> list[Path]:
    """Folders a person (or another monitor) owns, named as close to ours as possible."""
    pid = dead_pid()
    plain = [base / f"cliffwatch-2024-archive{tag}", base / f"cliffwatch-{pid}-x1y2{tag}",
             base / f".cliffwatch-scratch-{pid}-{tag}abcdefgh"]  # our name, no marker
    for folder in plain:
        folder.mkdir()
    real = killed_monitor_scratch(base)
    marker = json.loads((real / ".cliffwatch-scratch.json").read_text())
    made = [*plain, _copy(real, f"{pid}-{tag}wrongname", marker)]  # marker names another
    other_ns = _copy(real, f"{pid}-{tag}othernsxx", marker)
    _rewrite(other_ns, pidns=(marker["pidns"] or 0) + 1)  # a container sharing /dev/shm
    linked = _copy(real, f"{pid}-{tag}linkedxxx", marker)
    _rewrite(linked)
    (linked / ".cliffwatch-scratch.json").rename(linked / "real.json")
    (linked / ".cliffwatch-scratch.json").symlink_to(linked / "real.json")
    someone = _copy(real, f"{pid}-{tag}someonexx", marker)
    _rewrite(someone)
    for path in [someone, *someone.iterdir()]:
        os.chown(path, 65534, 65534, follow_symlinks=False)  # another user's
    shutil.rmtree(real)  # the real one is checked in its own test
    made += [other_ns, linked, someone]
    for folder in made:
        (folder / "keep.txt").write_text("mine")
    return made


def _copy(real: Path, suffix: str, marker: dict) -> Path:
    folder = real.with_name(f".cliffwatch-scratch-{suffix}")
    shutil.copytree(real, folder)
    (folder / ".cliffwatch-scratch.json").write_text(json.dumps(marker))
    return folder


def _rewrite(folder: Path, **changes) -> None:
    path = folder / ".cliffwatch-scratch.json"
    marker = json.loads(path.read_text())
    path.write_text(json.dumps({**marker, "folder": folder.name, **changes}))


def bases(tmp_path: Path) -> list[Path]:
    found = [tmp_path / "data"]
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        found.append(SHM)
    return found


def test_ingest_spares_every_folder_it_cannot_prove_it_made(tmp_path):
    logs = tmp_path / "logs" / "run"
    logs.mkdir(parents=True)
    (logs / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 0.5}\n')
    (tmp_path / "data").mkdir()
    tag = uuid.uuid4().hex[:6]
    theirs = [f for base in bases(tmp_path) for f in users_folders(base, tag)]
    try:
        done = run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--db",
                       str(tmp_path / "data" / "cw.duckdb"), "--once")
        assert done.returncode == 0, done.stderr
        for folder in theirs:
            assert (folder / "keep.txt").read_text() == "mine", folder
    finally:
        for folder in theirs:
            if folder.parent == SHM:
                shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("where", ["beside the database", "/dev/shm"])
def test_a_killed_monitors_own_scratch_folder_is_swept(tmp_path, where):
    base = tmp_path / "data" if where == "beside the database" else SHM
    if where == "/dev/shm" and not (SHM.is_dir() and os.access(SHM, os.W_OK)):
        pytest.skip("no writable /dev/shm on this machine")
    base.mkdir(exist_ok=True)
    logs = tmp_path / "logs" / "run"
    logs.mkdir(parents=True)
    log = logs / "metrics.jsonl"
    log.write_bytes(b'{"step": 1, "loss": 0.5}\n')
    left = killed_monitor_scratch(base)
    if where == "beside the database":
        os.link(log, left / "linked.jsonl")  # a links folder: only names go
    try:
        done = run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--db",
                       str(tmp_path / "data" / "cw.duckdb"), "--once")
        assert done.returncode == 0, done.stderr
        assert not left.exists()
        assert log.stat().st_nlink == 1 and log.read_bytes().count(b"\n") == 1  # names only
    finally:
        shutil.rmtree(left, ignore_errors=True)


def test_an_export_removes_only_parts_it_wrote(tmp_path):
    """Files of someone else's inside the archive, named as its own parts and temporaries,
    survive the clean-up of a killed export; the archive still holds each row once."""
    logs = tmp_path / "logs"
    (logs / "run").mkdir(parents=True)
    (logs / "run" / "metrics.jsonl").write_bytes(
        b"".join(b'{"step": %d, "loss": 0.5}\n' % s for s in range(10)))
    archive = tmp_path / "archive"
    assert run_cli("ingest", "--logdir", str(logs), "--once").returncode == 0
    first = run_cli("export", "--logdir", str(logs), "--to", str(archive))
    assert first.returncode == 0, first.stderr
    folder = archive / "metrics" / layout.partition("run")
    pq.write_table(pa.table({"step": [99]}), folder / "part-00007.parquet")  # not ours
    (folder / "part-00008.parquet").write_bytes(b"a user's notes")
    alive = folder / f".part-00002.parquet.tmp-{os.getpid()}"  # a live process's temporary
    alive.write_bytes(b"PAR1")
    with (logs / "run" / "metrics.jsonl").open("ab") as out:
        out.write(b'{"step": 10, "loss": 0.4}\n')
    assert run_cli("ingest", "--logdir", str(logs), "--once").returncode == 0
    again = run_cli("export", "--logdir", str(logs), "--to", str(archive))
    assert again.returncode == 0, again.stderr
    assert pq.read_table(folder / "part-00007.parquet")["step"].to_pylist() == [99]
    assert (folder / "part-00008.parquet").read_bytes() == b"a user's notes"
    assert alive.read_bytes() == b"PAR1"
    ours = [pq.read_table(folder / f"part-0000{n}.parquet")["step"].to_pylist() for n in (1, 2)]
    assert ours == [list(range(10)), [10]]


def test_an_export_into_someone_elses_dataset_is_refused(tmp_path):
    logs = tmp_path / "logs"
    (logs / "run").mkdir(parents=True)
    (logs / "run" / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 0.5}\n')
    theirs = tmp_path / "dataset" / "metrics" / "run=run"
    theirs.mkdir(parents=True)
    pq.write_table(pa.table({"step": [1]}), theirs / "part-0.parquet")  # pyarrow's own name
    (tmp_path / "dataset" / "README").write_text("my data")
    assert run_cli("ingest", "--logdir", str(logs), "--once").returncode == 0
    done = run_cli("export", "--logdir", str(logs), "--to", str(tmp_path / "dataset"))
    assert done.returncode != 0 and "pass an empty or new folder" in done.stderr
    assert pq.read_table(theirs / "part-0.parquet")["step"].to_pylist() == [1]
    assert sorted(p.name for p in theirs.iterdir()) == ["part-0.parquet"]
