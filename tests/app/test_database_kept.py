"""The monitor is never blinded by its own database (issue 18, findings 3, 4, 6 and 14), through
the real server and CLI:

- a query that holds memory DuckDB cannot spill is stopped before the writes starve;
- a database DuckDB invalidated (a checkpoint past the largest file allowed, or on a full
  disk) is opened again by itself: every line arrives once, without a restart, and health
  names the disk and its free space;
- a damaged file stops start-up before the URL with what to do (``--rebuild``), and a damaged
  block shows in health as the workers that fail on it;
- spilling is capped by ``--max-temp-size``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from app import settings as settings_mod
from app.monitor import default_db, spill_cap
from tests.conftest import free_port, run_cli, wait_for

WIDE = 30  # metrics per line: the WAL reaches DuckDB's 16 MiB checkpoint in ~60,000 lines
CHECKPOINT_WAL = 16 * 2**20  # DuckDB's checkpoint_threshold (the server never changes it)


class Log:
    """One run's metrics.jsonl, appended a batch at a time."""

    def __init__(self, logs: Path):
        self.path = logs / "r" / "metrics.jsonl"
        self.path.parent.mkdir(parents=True)
        self.step = 0

    def append(self, lines: int) -> None:
        with self.path.open("a") as handle:
            handle.write("".join(json.dumps({"step": s, "loss": 1.0 / (s + 1),
                                             **{f"m{k}": s * 0.5 + k for k in range(WIDE)}})
                                 + "\n" for s in range(self.step, self.step + lines)))
        self.step += lines


def _stored(server) -> list | str:
    response = server.sql("SELECT count(*), count(DISTINCT step) FROM metrics_all")
    return response.json()["rows"][0] if response.status_code == 200 else response.text


def _health(server) -> dict:
    return httpx.get(server.url + "/api/health", timeout=10).json()


def _all_stored(server, log: Log, timeout: float = 30) -> None:
    wait_for(lambda: _stored(server) == [log.step, log.step], timeout=timeout, interval=0.2)


def _near_checkpoint(server, log: Log, wal: Path) -> int:
    """Append until the WAL is within 4 MiB of DuckDB's checkpoint; returns its size."""
    log.append(1000)
    _all_stored(server, log)
    while not wal.exists() or wal.stat().st_size < CHECKPOINT_WAL - 4 * 2**20:
        log.append(5000)
        _all_stored(server, log)
    return wal.stat().st_size


def _until_lost(server, log: Log) -> dict:
    """Append until health says the database is being opened again."""
    for _ in range(40):
        log.append(3000)
        time.sleep(0.5)
        health = _health(server)
        if health["database"] == "failing":
            return health
    raise AssertionError(f"DuckDB never invalidated the database: {_health(server)}")


def _server_log(server) -> str:
    return Path(server.log.name).read_text(errors="replace")


def test_a_query_holding_memory_is_stopped_before_the_writes_starve(tmp_path, make_server):
    # list() of 30 M values is memory DuckDB cannot spill: two of them in a loop at 256MB
    # made a write's rollback fail and DuckDB invalidate the database (finding 6)
    log = Log(tmp_path / "logs")
    log.append(10)
    server = make_server(tmp_path / "logs")
    response = server.sql("SELECT len(list(random())) FROM range(30000000)")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith("query stopped: it made the monitor's database hold ")
    assert "values it cannot spill" in error and "raise --memory-limit" in error
    log.append(10)
    _all_stored(server, log)
    assert _health(server)["state"] == "ok"


def test_an_invalidated_database_is_opened_again_without_a_restart(tmp_path, make_server):
    # DuckDB invalidates the database when its checkpoint fails; here the checkpoint is made
    # to go past the largest file the server may write (RLIMIT_FSIZE), then allowed again
    resource = pytest.importorskip("resource")
    if not hasattr(resource, "prlimit"):
        pytest.skip("no prlimit on this platform: cannot limit the server's file size")
    logs = tmp_path / "logs"
    log = Log(logs)
    server = make_server(logs)
    db = default_db(logs)
    _near_checkpoint(server, log, db.with_name(db.name + ".wal"))
    unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE,
                     (max(db.stat().st_size, CHECKPOINT_WAL) + 2**18, resource.RLIM_INFINITY))
    try:
        health = _until_lost(server, log)
    finally:
        resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE, unlimited)
    assert health["state"] == "failing"
    assert "File too large" in health["database_error"]
    assert "opened again" in health["database_error"] and "restart" not in health["database_error"]
    _all_stored(server, log, timeout=60)  # no restart: every line once
    wait_for(lambda: _health(server)["state"] == "ok", timeout=30)
    assert server.sql("SELECT count(*) FROM ingest_errors").json()["rows"] == [[0]]
    log.append(5)  # and ingest goes on
    _all_stored(server, log)
    assert server.proc.poll() is None


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MiB tmpfs of its own (root with CAP_SYS_ADMIN), so the disk can be filled."""
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)],
                              capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no mount command here: cannot make a small disk to fill")
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}): needs root with "
                    "CAP_SYS_ADMIN")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


def test_a_full_disk_is_named_and_the_database_reopens_once_room_is_back(
        tmp_path, make_server, small_disk):
    # finding 3: health blamed memory and said to restart; freeing space did not help; the
    # diagnosis and tile workers logged a traceback about every second
    logs = tmp_path / "logs"
    log = Log(logs)
    server = make_server(logs, "--db", str(small_disk / "cw.duckdb"))
    wal = _near_checkpoint(server, log, small_disk / "cw.duckdb.wal")
    room = CHECKPOINT_WAL - wal + 2**20  # the WAL reaches the checkpoint, the checkpoint fails
    free = shutil.disk_usage(small_disk).free
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * max(0, free - room))
    health = _until_lost(server, log)
    error = health["database_error"]
    assert f"the disk holding {small_disk} has " in error and " free of 48.0 MiB" in error
    assert "No space left on device" in error and "memory" not in error
    assert "restart" not in error and "once its disk has room" in error
    time.sleep(3)  # a few passes of every worker while the disk stays full
    filler.unlink()
    _all_stored(server, log, timeout=60)  # no restart: every line once
    wait_for(lambda: _health(server)["state"] == "ok", timeout=30)
    assert server.sql("SELECT count(*) FROM ingest_errors").json()["rows"] == [[0]]
    text = _server_log(server)
    assert "Traceback" not in text
    assert text.count("cliffwatch.db: the database was invalidated") == 1
    assert text.count("database open again after") == 1
    for worker in ("live diagnosis", "chart tiles", "alert rules"):
        assert text.count(f"{worker} failing") <= 1, text[-3000:]


def _ingested(tmp_path, lines: int = 20_000) -> Path:
    logs = tmp_path / "logs"
    log = Log(logs)
    log.append(lines)
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0, done.stderr
    return logs


def _serve_briefly(logs: Path) -> subprocess.CompletedProcess:
    """`serve`, which must stop by itself (it has a damaged file to refuse)."""
    try:
        return run_cli("serve", "--logdir", str(logs), "--port", str(free_port()), timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("serve started on a damaged database file") from None


DAMAGE = {
    "truncated": lambda path: os.truncate(path, path.stat().st_size // 3),
    "random header": lambda path: _overwrite(path, 0),
}


def _overwrite(path: Path, offset: int, size: int = 4096) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(os.urandom(size))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_file_stops_serve_before_the_url_and_rebuild_reads_the_logs_again(
        tmp_path, damage):
    logs = _ingested(tmp_path)
    db = default_db(logs)
    DAMAGE[damage](db)
    damaged = db.read_bytes()
    served = _serve_briefly(logs)
    assert served.returncode == 2, served.stderr[-2000:]
    assert "Traceback" not in served.stderr and "dashboard and API at" not in served.stderr
    error = served.stderr.strip().splitlines()[-1]
    assert error.startswith(f"cliffwatch: cannot read database {db} (")
    assert "The logs are the source of truth" in error and "--rebuild" in error
    assert "alert history" in error and "silences" in error and "delivery log" in error
    rebuilt = run_cli("ingest", "--logdir", str(logs), "--once", "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "ingested 20000 rows" in rebuilt.stdout
    kept = list(db.parent.glob("cliffwatch.duckdb.corrupt-*"))
    assert [p.read_bytes() for p in kept] == [damaged]  # moved aside, never deleted
    assert f"the old database is kept as {kept[0]}" in rebuilt.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM metrics_all").fetchall() == [(20_000,)]


def test_a_damaged_block_shows_in_health_as_the_workers_it_stops(tmp_path, make_server):
    # a damaged block of metric_rows: start-up reads none of it and said "ok", while live
    # diagnosis failed every second in the log alone
    logs = _ingested(tmp_path)
    db = default_db(logs)
    with duckdb.connect(str(db), read_only=True) as con:
        (block,), = con.execute("SELECT min(block_id) FROM pragma_storage_info('metric_rows') "
                                "WHERE column_name = 'loss' AND block_id >= 0").fetchall()
    # a DuckDB file: three 4 KiB headers, then 256 KiB blocks (each checksummed)
    _overwrite(db, 3 * 4096 + block * 256 * 1024 + 1024)
    server = make_server(logs)
    health = wait_for(lambda: (h := _health(server))["diagnosis"] == "failing" and h, timeout=30)
    assert health["state"] == "failing"
    assert "Corrupt database file" in health["diagnosis_error"]
    assert "--rebuild" in health["diagnosis_error"]
    assert health["diagnosis_error"].startswith("live diagnosis failing for ")
    time.sleep(3)
    assert _server_log(server).count("live diagnosis failing") == 1  # said once, not each pass


def test_spilling_is_capped_by_max_temp_size(tmp_path, make_server):
    # finding 14: DuckDB's own cap is 90% of the free space on the disk it spills to
    def cap(size: str) -> int:
        return int(spill_cap(settings_mod.Settings(max_temp_size=size), tmp_path).removesuffix("b"))

    half_free = shutil.disk_usage(tmp_path).free // 2
    assert abs(cap("1000TB") - half_free) < 2**26  # never more than half the free space
    assert cap(settings_mod.Settings.max_temp_size) <= 4 * 10**9  # the default: 4GB at most
    log = Log(tmp_path / "logs")
    log.append(10)
    server = make_server(tmp_path / "logs", "--max-temp-size", "1MB")
    _all_stored(server, log)
    response = server.sql("SELECT max(r) FROM (SELECT random() AS r, range AS x "
                          "FROM range(20000000) ORDER BY 1)")  # a sort that spills
    assert response.status_code == 400
    assert "more spill space on disk than --max-temp-size allows" in response.json()["error"]
    # a write or a pass that ran beside the sort may have been refused room (CI, stop 35:
    # ingest "failed to offload data block"); each retries, and nothing stays failing
    wait_for(lambda: _health(server)["state"] == "ok", timeout=30, interval=0.2)
    log.append(10)
    _all_stored(server, log)
