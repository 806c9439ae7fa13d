"""The system sampler (cliffwatch/system.py) in real processes, writing real bytes.

Each test runs a small script in a fresh interpreter started at the repository root (where
`import cliffwatch` works), reads the system.jsonl it left and the stderr it said.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import psutil
import pytest

from cliffwatch import disks, system

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20


def run_script(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done


def samples(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / system.FILE).read_text().splitlines()]


@pytest.fixture
def disk_run():
    """A run folder on a real block device (tmpfs writes reach no disk), and that disk."""
    base = Path("/var/tmp")
    if not base.is_dir() or not os.access(base, os.W_OK):
        pytest.skip("/var/tmp (a folder on a real disk) is not there to write into")
    run = Path(tempfile.mkdtemp(prefix="cliffwatch-sampler-", dir=base))
    disk = disks.disk_of(run, psutil.disk_io_counters(perdisk=True) or {})
    if disk == disks.ALL:
        shutil.rmtree(run)
        pytest.skip(f"cannot tell which disk holds {run}, or its counters cannot be read "
                    "(/sys/dev/block, /proc/diskstats)")
    yield run, disk
    shutil.rmtree(run, ignore_errors=True)


WRITER = """
    import os, sys, time
    from pathlib import Path
    from cliffwatch import system
    run = Path(sys.argv[1])
    sampler = system.start(run, rank=0, last_step=lambda: None, sample_s=0.5)
    time.sleep(0.7)
    chunk = os.urandom(8 << 20)  # random: no layer below can shrink it
    with open(run / "step-100.pt", "wb") as f:
        for _ in range(25):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    time.sleep(0.6)
    sampler.stop()
"""


def test_written_megabytes_show_as_the_run_disks_write_bytes(disk_run):
    run, disk = disk_run
    run_script(WRITER, str(run))
    lines = samples(run)
    written = sum(line["disk_write_bytes"] for line in lines)
    # 200 MB fsync'd: at least that reached the disk; others on this machine write too, and
    # a unit slip (sectors, KiB) would land far outside these bounds
    assert 190 * MB <= written <= 2000 * MB, (written, lines)
    assert {line["disk"] for line in lines} == {disk}
    for line in lines:
        per_second = line["disk_write_bytes"] / line["sample_s"]
        assert line["disk_write_bps"] == pytest.approx(per_second, rel=0.01, abs=1.0)


BURNER = """
    import sys, threading, time
    from pathlib import Path
    from cliffwatch import system
    steps = []
    cpu = time.process_time()
    sampler = system.start(Path(sys.argv[1]), rank=0, sample_s=0.5,
                           last_step=lambda: steps[-1] if steps else None)
    time.sleep(0.7)
    def burn():
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            steps.append(len(steps))
    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    sampler.stop()
    print(time.process_time() - cpu)  # the CPU seconds the samples should add up to
"""


def test_a_thread_burning_cpu_shows_in_proc_cpu_percent(tmp_path):
    cpu_s = float(run_script(BURNER, str(tmp_path)).stdout)
    lines = samples(tmp_path)
    assert lines[0]["step"] is None  # sampled before the first step was logged
    busy = [line for line in lines if line["step"] is not None]
    # the machine may be shared (a spinning thread then gets a fraction of a core), so the
    # samples must add up to the CPU the process itself counted, whatever that was
    sampled_s = sum(line["proc_cpu_percent"] / 100 * line["sample_s"] for line in lines)
    assert sampled_s == pytest.approx(cpu_s, rel=0.2, abs=0.05), (cpu_s, lines)
    assert sum(line["proc_cpu_percent"] / 100 * line["sample_s"] for line in busy) > cpu_s / 2
    assert all(0 <= line["cpu_percent"] <= 100 for line in lines)
    assert all(line["cpu_max_core_percent"] >= line["cpu_percent"] - 0.1 for line in lines)
    assert [line["step"] for line in busy] == sorted(line["step"] for line in busy)


def test_every_field_of_the_interface_is_in_a_line(tmp_path):
    run_script("""
        import sys; from pathlib import Path; from cliffwatch import system
        system.start(Path(sys.argv[1]), rank=0, last_step=lambda: 7).stop()
    """, str(tmp_path))
    (line,) = samples(tmp_path)
    assert set(line) == {
        "time", "elapsed_s", "step", "host", "pid", "sample_s", "cpu_percent",
        "cpu_max_core_percent", "cpu_count", "proc_cpu_percent", "proc_rss_bytes",
        "mem_used_bytes", "mem_total_bytes", "swap_used_bytes", "disk", "disk_read_bps",
        "disk_write_bps", "disk_read_bytes", "disk_write_bytes", "net_recv_bps",
        "net_sent_bps", "gpus"}
    assert line["step"] == 7 and line["gpus"] == []  # no NVML library on these machines
    assert 0 < line["proc_rss_bytes"] < line["mem_total_bytes"]
    assert line["mem_used_bytes"] <= line["mem_total_bytes"]


def test_the_first_sample_comes_long_before_sample_s_and_the_last_at_stop(tmp_path):
    run_script("""
        import sys, time; from pathlib import Path; from cliffwatch import system
        run = Path(sys.argv[1])
        sampler = system.start(run, rank=0, last_step=lambda: None, sample_s=600)
        deadline = time.monotonic() + 60
        while not (run / "system.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        sampler.stop()
        sampler.stop()  # twice: nothing more
    """, str(tmp_path))
    first, last = samples(tmp_path)
    assert first["elapsed_s"] < 60 and first["elapsed_s"] <= last["elapsed_s"]


BLOCK_PSUTIL = """
    import sys
    class NoPsutil:  # psutil not installed: the base install of cliffwatch
        def find_spec(self, name, path=None, target=None):
            if name == "psutil" or name.startswith("psutil."):
                raise ImportError("No module named 'psutil'")
    sys.meta_path.insert(0, NoPsutil())
    from pathlib import Path
    from cliffwatch import system
    print(system.start(Path(sys.argv[1]), rank=0, last_step=lambda: None))
"""


def test_without_psutil_start_says_one_line_and_returns_none(tmp_path):
    done = run_script(BLOCK_PSUTIL, str(tmp_path))
    assert done.stdout == "None\n"
    assert done.stderr == system.OFF + "\n"
    assert not (tmp_path / system.FILE).exists()


def test_a_deleted_run_folder_is_said_once_and_the_process_goes_on(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    done = run_script("""
        import shutil, sys, time; from pathlib import Path; from cliffwatch import system
        run = Path(sys.argv[1])
        sampler = system.start(run, rank=0, last_step=lambda: None, sample_s=0.05)
        while not (run / "system.jsonl").exists():
            time.sleep(0.01)
        shutil.rmtree(run)
        time.sleep(0.5)  # some ten samples that cannot be written
        sampler.stop()
        print("training went on")
    """, str(run))
    assert done.stdout == "training went on\n"
    (said,) = done.stderr.splitlines()
    assert said.startswith(f"cliffwatch: cannot write {run / system.FILE}")
    assert said.endswith("training goes on")


def test_only_one_process_per_host_samples(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert system.start(tmp_path, rank=1, last_step=lambda: None) is None
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert system.start(tmp_path, rank=0, last_step=lambda: None) is None
    assert not (tmp_path / system.FILE).exists()
    monkeypatch.setenv("LOCAL_RANK", "0")  # rank 8 of a second host: its host's sampler
    sampler = system.start(tmp_path, rank=8, last_step=lambda: None)
    sampler.stop()
    assert len(samples(tmp_path)) == 1


def test_a_sample_s_that_is_not_positive_is_refused(tmp_path):
    with pytest.raises(ValueError, match="sample_s must be a positive number"):
        system.start(tmp_path, rank=0, last_step=lambda: None, sample_s=0)


MOUNTINFO = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
60 27 0:45 /@data /mnt/my\\040data rw,relatime shared:5 - btrfs /dev/nvme0n1p2 rw
61 27 0:46 / /mnt/my\\040data rw,relatime - overlay overlay rw
"""


@pytest.mark.parametrize(("path", "source"), [
    ("/work/main", "/dev/vda"),
    ("/dev/shm/x", "tmpfs"),
    ("/mnt/my data/runs/demo", "overlay"),  # mounted later over the same point: it wins
    ("/mnt/my datafile", "/dev/vda"),  # a longer name is not inside the mount point
])
def test_the_mount_holding_a_path_is_the_longest_last_mount_point(path, source):
    assert disks.mount_source(path, MOUNTINFO) == source


def test_a_folder_on_tmpfs_has_no_disk_of_its_own():
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.major(os.stat(shm).st_dev) != 0:
        pytest.skip("/dev/shm is not a tmpfs here")
    assert disks.disk_of(shm, psutil.disk_io_counters(perdisk=True) or {}) == disks.ALL


FILLS_UP = """
    import resource, signal, sys, time; from pathlib import Path; from cliffwatch import system
    run = Path(sys.argv[1])
    file = run / "system.jsonl"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    sampler = system.start(run, rank=0, last_step=lambda: None, sample_s=0.25)
    while not file.exists():
        time.sleep(0.01)
    written = file.stat().st_size
    while file.stat().st_size == written:  # just after a sample: the next is 0.25 s away
        time.sleep(0.005)
    # room for a third of a line more: the next write stops inside its line, later ones
    # fail, as on a disk filling up
    room = file.stat().st_size + 200
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (room, hard))
    while file.stat().st_size < room:
        time.sleep(0.01)
    time.sleep(0.6)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
    time.sleep(0.6)
    sampler.stop()
"""


def test_a_line_cut_off_by_a_full_disk_spoils_no_later_line(tmp_path):
    done = run_script(FILLS_UP, str(tmp_path))
    (said,) = done.stderr.splitlines()
    assert said.startswith("cliffwatch: cannot write") and "File too large" in said
    rows = (tmp_path / system.FILE).read_text().split("\n")
    assert rows[-1] == ""  # the file ends with a whole line
    bad = []
    for row in rows[:-1]:
        try:
            json.loads(row)
        except ValueError:
            bad.append(row)
    assert len(bad) == 1 and len(bad[0]) == 200 and bad[0].startswith('{"time"'), bad
    assert rows.index(bad[0]) < len(rows) - 2  # whole lines came after the cut one
