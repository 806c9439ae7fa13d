"""Catch-up as a user runs it (`ingest --once`), made cheaper without storing anything else.

DuckDB reads a whole log through a hard link to the checked descriptor's file
(chunk.whole_file), not a copy: the rows are the same, no name is left behind, a log that grows
meanwhile is stored once, and logs on another filesystem than the database are copied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pytest

from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import run_cli

LINES = 60_000  # ~3.6 MB: read whole, and long enough a read to be seen (or written to)


def line(step: int) -> bytes:
    return json.dumps({"step": step, "loss": 1.0 / (step + 1), "lr": 3e-4}).encode() + b"\n"


def write_log(logs: Path, lines: int = LINES) -> Path:
    path = logs / "run" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(line(s) for s in range(lines)))
    return path


def stored(db: Path) -> tuple:
    """(rows, distinct steps, lowest, highest, ingest errors) in the database file."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT count(*), count(DISTINCT step), min(step), max(step) "
                           "FROM metrics_all").fetchone()
        return (*rows, con.execute("SELECT count(*) FROM ingest_errors").fetchone()[0])


def test_once_reads_a_whole_log_through_a_link_and_leaves_no_name(tmp_path):
    logs = tmp_path / "logs"
    log = write_log(logs)
    time.sleep(0.05)  # past the filesystem's clock tick: a new link then moves the ctime
    before = log.stat().st_ctime_ns
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0 and f"ingested {LINES} rows" in done.stdout, done.stderr
    assert log.stat().st_ctime_ns != before  # linked (and unlinked): never copied
    assert log.stat().st_nlink == 1
    assert sorted(p.name for p in (logs / ".cliffwatch").iterdir()) == ["cliffwatch.duckdb"]
    assert stored(logs / ".cliffwatch" / "cliffwatch.duckdb") == (LINES, LINES, 0, LINES - 1, 0)


WRITER = """
import json, os, sys, time
path, stop, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "ab", buffering=0) as log:
    while not os.path.exists(stop):
        body = json.dumps({"step": step, "loss": 1.0 / (step + 1), "lr": 3e-4}).encode()
        if step % 16 == 0:
            log.write(body[:20])  # half a line on disk for a moment
            time.sleep(0.0002)
            body = body[20:]
        log.write(body + b"\\n")
        time.sleep(0.0002)
        step += 1
"""


def test_a_log_growing_while_read_through_its_link_is_stored_once(tmp_path):
    # the link shows DuckDB the file as it is when read, not the `size` bytes scanned: lines
    # (and half lines) appended meanwhile must not be stored, nor then be stored again
    logs = tmp_path / "logs"
    log = write_log(logs)
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(stop), str(LINES)])
    try:
        time.sleep(0.2)
        first = run_cli("ingest", "--logdir", str(logs), "--once")
        assert first.returncode == 0, first.stdout + first.stderr
    finally:
        stop.touch()
        writer.wait(timeout=30)
    db = logs / ".cliffwatch" / "cliffwatch.duckdb"
    rows, steps, low, high, errors = stored(db)
    assert (rows, steps, low, errors) == (high + 1, high + 1, 0, 0)  # a prefix, once each
    assert rows >= LINES
    second = run_cli("ingest", "--logdir", str(logs), "--once")
    assert second.returncode == 0, second.stdout + second.stderr
    total = log.read_bytes().count(b"\n")
    assert total > LINES
    assert stored(db) == (total, total, 0, total - 1, 0)


def test_logs_on_another_filesystem_than_the_database_are_copied(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) \
            or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second filesystem (/dev/shm) for the database")
    logs = tmp_path / "logs"
    log = write_log(logs)
    with tempfile.TemporaryDirectory(dir=shm) as elsewhere:
        db = Path(elsewhere) / "cw.duckdb"
        done = run_cli("ingest", "--logdir", str(logs), "--db", str(db), "--once")
        assert done.returncode == 0, done.stdout + done.stderr
        assert stored(db) == (LINES, LINES, 0, LINES - 1, 0)
        assert sorted(p.name for p in Path(elsewhere).iterdir()) == ["cw.duckdb"]
    assert log.stat().st_nlink == 1




def rows_and_errors(mon, run: str) -> tuple[list[dict], list[tuple]]:
    """A run's stored lines (their non-NULL values by column) and ingest errors."""
    cur = mon.db.cursor().execute(
        "SELECT * EXCLUDE (run, line_id, file_id) FROM metrics_all WHERE run = $r ORDER BY step",
        {"r": run})
    names = [d[0] for d in cur.description]
    rows = [{n: v for n, v in zip(names, row, strict=True) if v is not None}
            for row in cur.fetchall()]
    return rows, query(mon, f"SELECT file, \"offset\", severity, reason FROM ingest_errors "
                       f"WHERE run = '{run}' ORDER BY \"offset\"")


@pytest.mark.parametrize("key", ["grad_norm", "LOSS", "Time", "Attempt", "file_id", "Step",
                                 "rowid", "loss_1"])
def test_a_key_only_the_sample_holds_is_stored_as_when_described(tmp_path, key):
    # a fresh table takes its columns from the first line (no DESCRIBE); a key that only
    # DuckDB's sample holds must then be stored exactly as when the chunk is described first,
    # which a table with another run's column forces
    lines = [b'{"step": %d, "loss": 0.5, "time": %d.5}' % (s, s) for s in range(1, 30_001)]
    lines[300] = b'{"step": 301, "loss": 0.5, "time": 301.5, "%s": 7}' % key.encode()
    data = b"\n".join(lines) + b"\n"
    stored = []
    for other in (None, b'{"step": 1, "zzz": 1.0}\n'):
        logs = tmp_path / ("described" if other else "fresh") / "logs"
        if other:
            (logs / "other").mkdir(parents=True)
            (logs / "other" / "metrics.jsonl").write_bytes(other)
            ingest(logs).close()
        (logs / "x").mkdir(parents=True, exist_ok=True)
        (logs / "x" / "metrics.jsonl").write_bytes(data)
        with ingest(logs) as mon:
            stored.append(rows_and_errors(mon, "x"))
    assert len(stored[0][0]) == 30_000
    assert stored[0] == stored[1]


def test_a_sample_key_spelled_like_another_runs_column_keeps_its_own_column(tmp_path):
    # another run made the column time; this log's first line has no time, and "Time" on a
    # later line is a metric of its own (log_Time): taking the columns from the first line
    # would have let DuckDB match Time to time
    logs = tmp_path / "logs"
    (logs / "other").mkdir(parents=True)
    (logs / "other" / "metrics.jsonl").write_bytes(b'{"step": 1, "time": 5.0}\n')
    ingest(logs).close()
    lines = [b'{"step": %d, "loss": 0.5}' % s for s in range(1, 30_001)]
    lines[300] = b'{"step": 301, "loss": 0.5, "Time": 7}'
    (logs / "x").mkdir()
    (logs / "x" / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with ingest(logs) as mon:
        assert query(mon, "SELECT count(*), count(time), sum(log_Time) FROM metrics_all "
                     "WHERE run = 'x'") == [(30_000, 0, 7.0)]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
@pytest.mark.parametrize("linked", [False, True], ids=["copy", "link"])
def test_a_whole_log_is_scanned_only_once_asked_and_a_chunk_never_started_keeps_no_fd(
        tmp_path, linked):
    """The scan of a whole log begins at ``Chunk.start`` (just before the INSERT: the scanner
    holds the GIL the ALTERs ahead of it wait for), and a chunk sent back before its INSERT
    holds no descriptor of its own: whether it reads a scratch copy or a hard link to the log,
    which closing it must leave in place."""
    from app.ingest import chunk
    from app.ingest.openfile import open_log

    logs = tmp_path / "logs"
    write_log(logs)
    scratch, links = tmp_path / "scratch", tmp_path / "links"
    scratch.mkdir()
    links.mkdir()
    log_bytes = (logs / "run" / "metrics.jsonl").read_bytes()
    before = _open_fds()
    with open_log(logs, "run/metrics.jsonl") as handle:
        size = handle.info.st_size
        made = [chunk.whole_file(handle, size, scratch, links if linked else None)
                for _ in range(2)]
        unstarted, started = made
        assert [c.source_fd is not None for c in made] == [linked, linked]
        assert unstarted.scan is None  # not begun yet
        unstarted.close()
        started.start()
        assert started.result().lines == LINES and started.result().clean
        assert not started.grew()
        started.close()
    assert _open_fds() == before
    assert list(scratch.iterdir()) == [] and list(links.iterdir()) == []
    assert (logs / "run" / "metrics.jsonl").read_bytes() == log_bytes  # the user's log stays
