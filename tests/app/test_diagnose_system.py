"""System metrics as evidence (issue 21, section 3): what system.jsonl says the machine did
inside a stall's gap names its cause, with the numbers: disk writes like a save (checkpoint,
inferred, even with no checkpoint event; a logged save still comes first), swap growing
(swap), the GPUs idle with the input queue empty or one core pegged (input_wait), a GPU's
memory near its total (gpu_memory; after a crash's last step, the crash's second cause). Live
diagnosis stores what the whole run gives. A quiet disk, a disk busy all along, or idle GPUs
with a full queue name none of them. Real ingest of real files into a DuckDB file in tmp_path;
the end-to-end test runs the sampler in a real process that writes 900 MiB during a stall."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose
from app.diagnose.system import size
from app.units import binary
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import ROOT, run_cli

T0 = 1_795_939_200.0  # the lines' and samples' Unix time at step 0
STALL = 41  # the line logged 14 s after the one before; the others come 1 s apart
GAP_S = 14.0
BASE = {"host": "gpu-box-1", "pid": 4242, "sample_s": 1.0, "cpu_percent": 20.0,
        "cpu_max_core_percent": 40.0, "cpu_count": 16, "proc_cpu_percent": 30.0,
        "proc_rss_bytes": 2_000_000_000, "mem_used_bytes": 50_000_000_000,
        "mem_total_bytes": 128_000_000_000, "swap_used_bytes": 0, "disk": "nvme0n1",
        "disk_read_bps": 0.0, "disk_write_bps": 100_000.0, "disk_read_bytes": 0,
        "disk_write_bytes": 100_000, "net_recv_bps": 1024.0, "net_sent_bps": 2048.0}
GPU = {"index": 0, "util_percent": 98.0, "mem_used_bytes": 80_000_000_000,
       "mem_total_bytes": 140_000_000_000, "power_w": 412.3, "temp_c": 61.0}
SAVING = {"disk_write_bps": 22_300_000.0, "disk_write_bytes": 22_300_000}  # 22.3 MB/s


def clock(step: int) -> float:
    return T0 + step + (GAP_S - 1.0 if step >= STALL else 0.0)


def lines(queue: dict[int, int] | None = None, spike: bool = False) -> list[dict]:
    rng = random.Random(1)
    out = []
    for step in range(1, 61):
        loss = 2.0 * rng.uniform(0.99, 1.01) * (8.0 if spike and step == STALL + 1 else 1.0)
        line = {"step": step, "loss": round(loss, 4), "time": clock(step),
                "elapsed_s": clock(step) - T0}
        if queue is not None:
            line["hs_queue_depth"] = queue.get(step, 4)
        out.append(line)
    return out


def samples(gap: dict, gpu_gap: dict | None = None, base: dict | None = None,
            gpus: bool = True, swap_from: int = 0, gpu_last: dict | None = None) -> list[dict]:
    """A sample every second from step 0 to 3 s after the last line; those taken inside the
    stall's gap carry ``gap`` (and ``gpu_gap`` for the GPU), those after the last line
    ``gpu_last``; swap grows in steps from ``swap_from``."""
    out, t, end = [], T0 - 0.5, clock(60) + 3.0  # half a second off the lines: the sample
    # after the stall's line covers the gap's last half second (left out: live has not read it)
    start, stop = clock(STALL - 1), clock(STALL)
    while t < end:
        t += 1.0
        inside = start < t <= stop
        step = max((s for s in range(1, 61) if clock(s) <= t), default=None)
        sample = {"time": t, "elapsed_s": t - T0, "step": step, **BASE, **(base or {}),
                  **(gap if inside else {})}
        if "swap_used_bytes" in gap and inside:
            sample["swap_used_bytes"] = int(swap_from + (t - start) / GAP_S
                                            * (gap["swap_used_bytes"] - swap_from))
        gpu = {**GPU, **(gpu_gap if inside and gpu_gap else {}),
               **(gpu_last if step == 60 and gpu_last else {})}
        sample["gpus"] = [gpu] if gpus else []
        out.append(sample)
    return out


CHECKPOINT = [{"event": "checkpoint_start", "step": STALL - 1, "elapsed_s": STALL - 0.9},
              {"event": "checkpoint_end", "step": STALL - 1, "elapsed_s": STALL + GAP_S - 2,
               "blocked_s": 12.9}]
FAILED = [{"event": "run_end", "step": 60, "status": "failed", "elapsed_s": 75.5,
           "time": T0 + 75.5, "error": "CUDA error: an illegal memory access"}]
CASES = {  # run -> (metrics lines, system samples or None, events)
    "save": (lines(spike=True), samples(SAVING, {"util_percent": 0.0}), []),
    "logged_save": (lines(), samples(SAVING), CHECKPOINT),
    "save_any_disk": (lines(), samples(SAVING, base={"disk": "all"}), []),
    "quiet": (lines(), samples({"disk_write_bps": 500_000.0, "disk_write_bytes": 500_000}), []),
    "busy_disk": (lines(), samples(SAVING, base=SAVING), []),
    "no_system": (lines(), None, []),
    "input_queue": (lines(queue={STALL: 0}), samples({}, {"util_percent": 1.5}), []),
    "queue_full": (lines(queue={}), samples({}, {"util_percent": 1.5}), []),
    "pegged": (lines(), samples({"cpu_max_core_percent": 100.0, "proc_cpu_percent": 99.5},
                                gpus=False), []),
    "gpu_memory": (lines(), samples({}, {"mem_used_bytes": 139_100_000_000}), []),
    "swap": (lines(), samples({"swap_used_bytes": 2_147_000_000}), []),
    "oom": (lines(), samples({}, gpu_last={"mem_used_bytes": 139_100_000_000}), FAILED),
    "failed": (lines(), samples({}), FAILED),
}


def write(folder: Path, name: str) -> None:
    metrics, system, events = CASES[name]
    (folder / name).mkdir(parents=True)
    (folder / name / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in metrics))
    if system is not None:
        (folder / name / "system.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in system))
    if events:
        (folder / name / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in events))


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict[str, dict[tuple, object]]:
    """Every case ingested once and diagnosed whole: run -> (kind, step) -> incident."""
    logs = tmp_path_factory.mktemp("system") / "logs"
    for name in CASES:
        write(logs, name)
    with ingest(logs) as mon:
        incidents = diagnose(mon.db.cursor(), Watch())
    by_run: dict[str, dict] = {name: {} for name in CASES}
    for i in incidents:
        by_run[i.run][(i.kind, i.step)] = i
    return by_run


def stall(found, run: str):
    incident = found[run].get(("stall", STALL))
    assert incident is not None, f"{run}: no stall at step {STALL}: {list(found[run])}"
    return incident


def first_evidence(found, run: str, cause: str) -> str:
    """The evidence of the stall's first cause, once that cause is ``cause``."""
    incident = stall(found, run)
    assert incident.causes[0] == cause, (run, incident.causes)
    return incident.evidence[0]


def test_disk_writes_in_a_stall_name_a_checkpoint_no_event_logged(found):
    assert first_evidence(found, "save", "checkpoint") == (
        "checkpoint-like disk writes inside the 14.0 s gap before step 41: 21.5 MB/s against "
        "the run's typical 100 kB/s, with no checkpoint logged. (inferred: system.jsonl: "
        "301.1 MB written to nvme0n1 during the 14.0 s gap)")
    # the GPUs idled while the loop waited on the save: no input pipeline to blame
    assert "input_wait" not in stall(found, "save").causes


def test_writes_the_sampler_could_not_place_on_one_disk_say_every_disk(found):
    assert first_evidence(found, "save_any_disk", "checkpoint").endswith(
        "301.1 MB written to every disk during the 14.0 s gap)")


def test_the_spike_after_a_stall_that_wrote_like_a_save_names_it(found):
    spike = found["save"][("spike", STALL + 1)]
    assert spike.causes[0] == "checkpoint"
    assert spike.evidence[0].startswith(
        "checkpoint-like disk writes inside the 14.0 s gap before step 41, 1 line before step "
        "42: 21.5 MB/s")


def test_a_logged_save_comes_before_the_disk(found):
    evidence = first_evidence(found, "logged_save", "checkpoint")
    assert evidence.endswith("(logged: events.jsonl)")
    assert "blocked the training loop for 12.9 s" in evidence


@pytest.mark.parametrize("run", ["quiet", "busy_disk", "no_system"])
def test_a_quiet_or_always_busy_disk_is_no_save(found, run):
    assert "checkpoint" not in stall(found, run).causes


def test_idle_gpus_with_the_input_queue_empty_are_input_bound(found):
    assert first_evidence(found, "input_queue", "input_wait") == (
        "the GPUs idled at 1.5% inside the 14.0 s gap before step 41 with the input queue "
        "empty (hs_queue_depth 0 at step 41): the input pipeline did not keep up. (inferred: "
        "system.jsonl: util_percent; the hs_queue_depth column)")


def test_idle_gpus_with_a_full_queue_are_not_input_bound(found):
    assert "input_wait" not in stall(found, "queue_full").causes


def test_one_core_pegged_by_the_process_is_input_bound(found):
    assert first_evidence(found, "pegged", "input_wait").startswith(
        "one CPU core ran at 100% inside the 14.0 s gap before step 41 while the process used "
        "99.5% (about one of its 16 cores): a single-threaded input pipeline did not keep up.")


def test_gpu_memory_near_its_total_is_quoted(found):
    assert first_evidence(found, "gpu_memory", "gpu_memory").startswith(
        "GPU 0's memory was at 129.5 GiB of its 130.4 GiB (99.4%) inside the 14.0 s gap before "
        "step 41")


def test_swap_growing_in_a_stall_is_quoted(found):
    assert first_evidence(found, "swap", "swap").startswith(
        "swap in use grew from 0 B to 1.9 GiB inside the 14.0 s gap before step 41, with "
        "46.6 GiB of the host's 119.2 GiB memory used: the host was paging.")


def test_gpu_memory_near_its_total_before_a_crash_is_its_second_cause(found):
    crashed = found["oom"][("crash", 60)]
    assert crashed.causes == ["crash", "gpu_memory"]
    assert crashed.evidence[1] == (
        "GPU 0's memory was at 129.5 GiB of its 130.4 GiB (99.4%) after step 60, the last one "
        "logged before the run failed: near its total, allocations wait on the cache and then "
        "fail. (inferred: system.jsonl: gpus' mem_used_bytes)")
    assert found["failed"][("crash", 60)].causes == ["crash"]


@pytest.mark.parametrize(("value", "text"), [(0, "0 B"), (999, "999 B"), (100_000, "100 kB"),
                                             (312_200_000, "312.2 MB"),
                                             (2_147_483_648, "2.147 GB")])
def test_sizes_read_in_si_units_to_four_figures(value, text):
    assert size(value) == text


@pytest.mark.parametrize(("value", "text"), [(0, "0 B"), (1023, "1023 B"), (2**31, "2.0 GiB"),
                                             (150_754_820_096, "140.4 GiB"),
                                             (3 * 2**40, "3.0 TiB")])
def test_memory_reads_in_binary_units_as_pytorch_and_nvidia_smi_say_it(value, text):
    # an H200's total as NVML gives it: PyTorch's error beside it says "139.80 GiB"
    assert binary(value) == text


@pytest.mark.parametrize("cut", [clock(STALL) - GAP_S / 2, clock(STALL)],
                         ids=["inside-the-gap", "at-the-stall-line"])
def test_live_diagnosis_gives_the_whole_runs_machine_causes(tmp_path, cut):
    """Lines and samples arrive in two parts, cut inside the stall's gap or right at its line
    (the samples after it not read yet): the stored causes are the whole run's."""
    names = ("save", "input_queue", "swap", "logged_save")
    for name in names:
        write(tmp_path / "full", name)
    for name in names:
        (tmp_path / "logs" / name).mkdir(parents=True)
        for path in (tmp_path / "full" / name).iterdir():
            text = path.read_text().splitlines(True)
            first = [x for x in text if json.loads(x).get("time", 0) <= cut]
            (tmp_path / "logs" / name / path.name).write_text("".join(first))
    with ingest(tmp_path / "logs") as mon:
        live = LiveDiagnosis(mon.db, Watch())
        live.update()
        for name in names:
            for path in (tmp_path / "full" / name).iterdir():
                (tmp_path / "logs" / name / path.name).write_text(path.read_text())
        mon.tailer.tick(discover=True)
        live.update()
        stored = sorted(query(mon, "SELECT run, kind, step, causes, evidence FROM incidents"))
        whole = sorted((i.run, i.kind, i.step, i.causes, i.evidence)
                       for i in diagnose(mon.db.cursor(), Watch()))
    assert stored == whole
    assert {row[3][0] for row in whole if row[1] == "stall"} == {"checkpoint", "input_wait",
                                                                 "swap"}


# ---- end to end: the sampler in a real process -----------------------------------------------

WRITER = textwrap.dedent("""
    import os, sys, time
    import cliffwatch

    logdir, big = sys.argv[1], sys.argv[2]
    run = cliffwatch.init(logdir=logdir, name="disk-stall", system=True, sample_s=0.5)
    for step in range(1, 41):
        run.log({"loss": 2.0 + 0.01 * (step % 3)}, step=step)
        time.sleep(0.1)
    # the stall: 900 MiB written with fsync over 4 s or more, and no checkpoint event (so
    # much that the suite's other tests writing to the same disk stay far below 1/5 of it)
    chunk, started = os.urandom(10 << 20), time.monotonic()
    with open(big, "wb") as f:
        for i in range(90):
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
            time.sleep(max(0.0, started + 4.0 * (i + 1) / 90 - time.monotonic()))
    for step in range(41, 61):
        run.log({"loss": 2.0 + 0.01 * (step % 3)}, step=step)
        time.sleep(0.1)
    run.finish()
""")


def readable_disk(folder: Path) -> None:
    """Skip unless psutil reads per-disk counters and ``folder`` is on a block device (the
    writes of a tmpfs reach no disk counter)."""
    psutil = pytest.importorskip("psutil", reason="the sampler needs psutil")
    if not psutil.disk_io_counters(perdisk=True):
        pytest.skip("this machine's disk counters cannot be read (psutil.disk_io_counters)")
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    where = max((m for m in mounts if str(folder.resolve()).startswith(m[1])),
                key=lambda m: len(m[1]), default=None)
    if where is not None and where[2] in ("tmpfs", "ramfs"):
        pytest.skip(f"{folder} is on {where[2]}: its writes reach no disk counter")


def test_a_stall_spent_writing_to_disk_is_diagnosed_from_system_jsonl_alone(tmp_path):
    readable_disk(tmp_path)
    logs = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", WRITER, str(logs), str(tmp_path / "big.bin")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    (tmp_path / "big.bin").unlink()
    run = logs / "disk-stall"
    assert (run / "system.jsonl").stat().st_size > 0, done.stderr
    events = (run / "events.jsonl").read_text() if (run / "events.jsonl").exists() else ""
    assert "checkpoint" not in events
    ingested = run_cli("ingest", "--logdir", str(logs), "--once")
    assert ingested.returncode == 0, ingested.stderr
    report = run_cli("diagnose", str(logs))
    assert report.returncode == 0, report.stderr
    stalls = [p for p in report.stdout.split("\n\n") if "STALL" in p and "step 41" in p]
    assert stalls, report.stdout
    assert "- checkpoint (inferred: system.jsonl: " in stalls[0], report.stdout
    assert "checkpoint-like disk writes inside the " in stalls[0], report.stdout
