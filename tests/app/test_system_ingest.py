"""system.jsonl, the sampler's file in a run folder, is read live and exactly once into
system_samples and system_gpus (migration 0025), never as a metrics log: real files, the real
watchdog worker and the real `ingest --once`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from app import settings as settings_mod
from app.dashboard import charts
from app.monitor import Monitor
from app.read import system as system_read
from tests.app.test_charts import items
from tests.conftest import run_cli, wait_for

BAD = b'{"time": 17959392\n'


def sample(i: int, step: int | None, gpus: int = 2) -> dict:
    """A line in the documented shape (docs/log-format.md, the sampler's system.jsonl)."""
    return {"time": 1795939200.0 + 2 * i, "elapsed_s": 2.0 * i, "step": step,
            "host": "gpu-box-1", "pid": 4242, "sample_s": 2.0, "cpu_percent": 30.0 + i,
            "cpu_max_core_percent": 100.0, "cpu_count": 16, "proc_cpu_percent": 99.1,
            "proc_rss_bytes": 2147483648, "mem_used_bytes": 51539607552 + i,
            "mem_total_bytes": 137438953472, "swap_used_bytes": 0, "disk": "nvme0n1",
            "disk_read_bps": 0.0, "disk_write_bps": 1048576.0 * i, "disk_read_bytes": 0,
            "disk_write_bytes": 2097152 * i, "net_recv_bps": 1024.0, "net_sent_bps": 2048.0,
            "gpus": [{"index": g, "util_percent": 90.0 + g, "mem_used_bytes": 80530636800,
                      "mem_total_bytes": 150323855360, "power_w": 412.3, "temp_c": 61.0}
                     for g in range(gpus)]}


def append(path: Path, *lines: bytes) -> int:
    """Append lines; returns the byte offset of the first."""
    with path.open("ab") as handle:
        offset = handle.tell()
        handle.write(b"".join(lines))
    return offset


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def rows(monitor: Monitor, sql: str) -> list[tuple]:
    return monitor.db.cursor().execute(sql).fetchall()


def test_samples_arrive_live_beside_a_growing_metrics_log(live):
    # the sampler writes while the loop logs; one sample is cut short by a crash of the writer
    logs, monitor = live
    run = logs / "drafter"
    run.mkdir()
    metrics, system = run / "metrics.jsonl", run / "system.jsonl"
    bad_at: list[int] = []

    def trainer():
        append(system, line(sample(0, None)))
        for i in range(1, 61):
            append(metrics, line({"step": i * 10, "loss": 2.0 / i, "elapsed_s": 2.0 * i}))
            append(system, line(sample(i, i * 10)))
            if i == 30:
                bad_at.append(append(system, BAD))
            time.sleep(0.005)

    thread = threading.Thread(target=trainer)
    thread.start()
    thread.join()
    wait_for(lambda: rows(monitor, "SELECT count(*) FROM system_samples")[0][0] == 61
             and rows(monitor, "SELECT count(*) FROM metrics")[0][0] == 60)
    time.sleep(0.3)  # a second read of any line would show now
    assert rows(monitor, "SELECT count(*), count(DISTINCT time), min(step), max(step), "
                "count(*) FILTER (WHERE step IS NULL) FROM system_samples") == [
        (61, 61, 10, 600, 1)]
    assert rows(monitor, "SELECT count(*), count(DISTINCT (time, gpu)) FROM system_gpus") == [
        (122, 122)]
    assert rows(monitor, "SELECT run, cpu_percent, disk_write_bps, mem_total_bytes, disk, "
                "host FROM system_samples WHERE step = 300") == [
        ("drafter", 60.0, 1048576.0 * 30, 137438953472, "nvme0n1", "gpu-box-1")]
    assert rows(monitor, "SELECT gpu, util_percent, mem_total_bytes, step FROM system_gpus "
                "WHERE step = 300 ORDER BY gpu") == [(0, 90.0, 150323855360, 300),
                                                     (1, 91.0, 150323855360, 300)]
    # the metrics log is the only training line of the run: no sample is a metric row
    assert rows(monitor, "SELECT count(*), max(step) FROM metrics_all") == [(60, 600)]
    assert rows(monitor, "SELECT kind FROM line_files") == [("metrics",)]
    assert rows(monitor, "SELECT file, \"offset\", severity, reason LIKE 'invalid JSON%' "
                "FROM ingest_errors") == [("drafter/system.jsonl", bad_at[0], "error", True)]


def test_a_value_of_the_wrong_type_is_null_and_said_at_its_line(live):
    logs, monitor = live
    (logs / "odd").mkdir()
    good = sample(1, 10, gpus=1)
    odd = good | {"cpu_percent": "high", "cpu_count": 1.5, "gpus": "none"}
    at = append(logs / "odd" / "system.jsonl", line(good), line(odd),
                line({"time": 1795939300.0}))  # another sampler: most fields missing
    wait_for(lambda: rows(monitor, "SELECT count(*) FROM system_samples")[0][0] == 3)
    assert rows(monitor, "SELECT cpu_percent, cpu_count, mem_used_bytes FROM system_samples "
                "ORDER BY time, cpu_percent NULLS LAST") == [
        (31.0, 16, 51539607553), (None, None, 51539607553), (None, None, None)]
    assert rows(monitor, "SELECT count(*) FROM system_gpus") == [(1,)]
    (offset, reason), = rows(monitor, "SELECT \"offset\", reason FROM ingest_errors")
    assert offset == at + len(line(good))
    assert "'cpu_percent' is not a number" in reason and "'cpu_count'" in reason
    assert "'gpus' is not a list" in reason


def test_ingest_once_reads_each_sample_once_and_no_metrics_from_it(tmp_path):
    # a run of another trainer's text log: before system.jsonl had a kind of its own, its
    # lines (they carry "step") were read as a second metrics log of the run
    logs = tmp_path / "logs"
    run = logs / "nano"
    run.mkdir(parents=True)
    (run / "train.log").write_text("".join(f"iter {s}: loss {4 - s / 100:.4f}, time 35.21ms\n"
                                           for s in range(10, 110, 10)))
    system = run / "system.jsonl"
    append(system, *(line(sample(i, i * 10)) for i in range(1, 6)))
    db = ["--logdir", str(logs)]
    assert run_cli("ingest", *db, "--once").returncode == 0
    append(system, *(line(sample(i, i * 10)) for i in range(6, 9)))
    assert run_cli("ingest", *db, "--once").returncode == 0
    assert run_cli("ingest", *db, "--once").returncode == 0  # nothing new: nothing stored
    found = run_cli("sql", *db, "--format", "json", "SELECT (SELECT count(*) FROM "
                    "system_samples), (SELECT count(DISTINCT time) FROM system_samples), "
                    "(SELECT count(*) FROM system_gpus), (SELECT count(*) FROM metrics_all), "
                    "(SELECT max(step) FROM metrics_all), (SELECT count(*) FROM ingest_errors "
                    "WHERE severity <> 'info')")
    assert found.returncode == 0, found.stderr
    assert list(json.loads(found.stdout)[0].values()) == [8, 8, 16, 10, 100, 0]


@pytest.mark.parametrize("x", ["step", "elapsed", "time"])
def test_the_panel_reads_a_bounded_series_on_each_x(tmp_path, x):
    run = tmp_path / "logs" / "long"
    run.mkdir(parents=True)
    append(run / "system.jsonl", *(line(sample(i, i * 10)) for i in range(1, 201)))
    assert run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once").returncode == 0
    with Monitor.open(tmp_path / "logs", settings_mod.resolve()) as monitor:
        found = system_read.series(monitor.db.cursor(), "long", x=x, points=20)
        zoomed = system_read.series(monitor.db.cursor(), "long", x=x, lo=500, hi=600)
    per_series = found.groupby(["chart", "series"]).size()
    assert set(found["chart"]) == set(system_read.CHARTS)
    assert per_series.max() <= 20 and per_series.min() >= 10  # buckets, not 200 samples
    assert "swap used" not in set(found["series"])  # never used: no series
    assert found.groupby(["chart", "series"])["n"].sum().eq(200).all()  # every sample once
    assert zoomed["step"].between(500, 600).all() and zoomed["n"].sum() > 0
    use = found[found["chart"] == "utilisation %"]
    points = items(charts.system_chart(use, "utilisation %", x=x), "line")
    assert len(points) == len(use)  # each bucket placed on its x
    assert len({p["stroke"] for p in points}) == 4  # CPU, busiest core, GPU 0, GPU 1
