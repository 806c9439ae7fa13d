"""/api/export is bounded (issue 18, finding 9): a few streams at once, each holding about one
Arrow batch, and no query sorting a whole run.

60 export streams opened and never read took the server to 8.27 GB (its --memory-limit is
256 MB) and it stayed at 7.3 GB; each stream's query had sorted its whole run, and a stream
whose client went away was never closed, so later exports failed out of memory. Through the
real server: many unread streams, the extra ones refused with what to do, the server's memory
bounded, the monitor still ingesting, and a normal export afterwards. Pages (app/export/
pages.py) in-process: every row once, in order, whatever the buckets.
"""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from app.cli.main import main
from app.db.database import Database
from app.export import pages, tables
from app.server.export_routes import EXPORT_STREAMS
from tests.conftest import wait_for

LINES, METRICS = 100_000, 10  # one Arrow batch of this run is about 13 MB
OPENED = 3 * EXPORT_STREAMS + 2
RSS_BOUND_MB = 1500  # a behaviour check: 60 unread streams once held 8,270 MB


def write_big_run(logdir: Path, name: str = "big", lines: int = LINES) -> None:
    (logdir / name).mkdir(parents=True, exist_ok=True)
    with (logdir / name / "metrics.jsonl").open("w") as f:
        for step in range(lines):
            f.write(json.dumps({"step": step, **{f"m{i}": step + i / 10 for i in range(METRICS)}})
                    + "\n")


def rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def unread_stream(port: int, mark: int) -> socket.socket:
    """An export request whose answer is never read past its first bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the client's window stays shut
    sock.sendall(f"GET /api/export/metrics?run=big&after=-1&upto={mark} HTTP/1.1\r\n"
                 f"Host: 127.0.0.1:{port}\r\n\r\n".encode())
    return sock


def answer_head(sock: socket.socket) -> str:
    """The status line and, for a refusal, its body (a stream's first bytes are all we read)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    if b" 200 " in data.split(b"\r\n", 1)[0]:
        return data.split(b"\r\n", 1)[0].decode()
    while b"}" not in data:
        data += sock.recv(4096)
    return data.decode("latin-1")


def test_unread_exports_are_bounded_and_a_normal_export_works_afterwards(tmp_path, make_server):
    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    write_big_run(logdir)
    server = make_server(logdir)
    wait_for(lambda: server.sql("SELECT count(*) FROM metrics").json()["rows"][0][0] == LINES,
             timeout=120)
    mark = server.sql("SELECT max(line_id) FROM metrics_all").json()["rows"][0][0]
    socks = [unread_stream(server.port, mark) for _ in range(OPENED)]
    try:
        heads = [answer_head(sock) for sock in socks]
        streaming = [h for h in heads if " 200 " in h]
        refused = [h for h in heads if " 503 " in h]
        assert len(streaming) == EXPORT_STREAMS and len(refused) == OPENED - EXPORT_STREAMS
        assert "already streaming" in refused[0] and "run the export again" in refused[0]
        assert rss_mb(server.proc.pid) < RSS_BOUND_MB
        # the streams that wait on their clients block nothing else
        write_big_run(logdir, "other", lines=10)
        wait_for(lambda: server.sql("SELECT count(*) FROM metrics WHERE run = 'other'")
                 .json()["rows"][0][0] == 10, timeout=60)
    finally:
        for sock in socks:
            sock.close()
    assert main(["export", "--logdir", str(logdir), "--to", str(archive)]) == 0
    big = pq.ParquetFile(archive / "metrics" / "run=big" / "part-00001.parquet")
    assert big.metadata.num_rows == LINES
    assert rss_mb(server.proc.pid) < RSS_BOUND_MB
    assert "Traceback" not in Path(server.log.name).read_text()


def pages_read(ids: list[int], plan: list[pages.Page]) -> list[list[int]]:
    """What the rows query returns for each page, over a run whose row ids are ``ids``."""
    out = []
    for page in plan:
        inside = sorted(i for i in ids if page.after < i <= page.upto)
        out.append(inside[page.skip:page.skip + page.rows])
    return out


def buckets(ids: list[int], span: int, after: int, upto: int) -> list[tuple[int, int]]:
    counts: dict[int, int] = {}
    for i in ids:
        if after < i <= upto:
            counts[i // span] = counts.get(i // span, 0) + 1
    return sorted(counts.items())


@pytest.mark.parametrize(("ids", "span", "after", "upto", "rows"), [
    (list(range(450)), 25, -1, 449, 100),  # dense: pages of 100, 100, 100, 100, 50
    (list(range(350, 800)), 25, -1, 10**9, 100),  # not starting at a bucket's edge
    (list(range(0, 10_000, 37)), 25, 100, 9_000, 7),  # sparse, interleaved with other runs
    (list(range(10)), 25, -1, 5, 100),  # the mark cuts the run
    ([], 25, -1, 100, 100),  # nothing new
    (random.Random(18).sample(range(100_000), 3_000), 64, 999, 90_000, 256),
])
def test_pages_hold_every_row_once_in_order(ids, span, after, upto, rows):
    plan = pages.plan(buckets(ids, span, after, upto), span, after, upto, rows)
    read = pages_read(ids, plan)
    assert [i for page in read for i in page] == sorted(i for i in ids if after < i <= upto)
    assert all(len(page) == rows for page in read[:-1])
    assert all(page.skip <= span for page in plan)  # what a page's query sorts beyond it


def test_a_column_added_while_a_run_is_read_keeps_the_first_pages_columns(tmp_path,
                                                                         monkeypatch):
    logdir = tmp_path / "logs"
    write_big_run(logdir, lines=50)
    assert main(["ingest", "--logdir", str(logdir), "--once"]) == 0
    monkeypatch.setattr(tables, "BATCH_ROWS", (10, 10))
    db = Database(logdir / ".cliffwatch" / "cliffwatch.duckdb")
    try:
        reader = tables.rows(db.con.cursor(), tables.TABLES_BY_NAME["metrics"], "big", -1,
                             10**9)
        first = reader.read_next_batch()
        db.cursor().execute("ALTER TABLE metric_rows ADD COLUMN late DOUBLE")
        rest = list(reader)
    finally:
        db.close()
    assert [b.num_rows for b in [first, *rest]] == [10] * 5
    assert all(b.schema == reader.schema for b in rest) and "late" not in reader.schema.names
    steps = [s for b in [first, *rest] for s in b.column("step").to_pylist()]
    assert steps == list(range(50))


def test_a_run_is_read_within_a_memory_limit_too_small_to_sort_it(tmp_path, monkeypatch):
    """The old single ORDER BY sorted the whole run inside DuckDB's memory limit (a run of
    1,000,000 lines of 30 metrics held 245 of the 256 MB while it was read): here 20 MB of
    rows under a 16 MB limit ran out of memory. Pages of 2,048 rows fit."""
    logdir = tmp_path / "logs"
    write_big_run(logdir, lines=200_000)
    assert main(["ingest", "--logdir", str(logdir), "--once"]) == 0
    monkeypatch.setattr(tables, "BATCH_ROWS", (2048, 2048))
    db = Database(logdir / ".cliffwatch" / "cliffwatch.duckdb", memory_limit="16MB")
    try:
        reader = tables.rows(db.con.cursor(), tables.TABLES_BY_NAME["metrics"], "big", -1,
                             10**9)
        steps = [b.column("step") for b in reader]
    finally:
        db.close()
    assert sum(len(s) for s in steps) == 200_000
    assert steps[0][0].as_py() == 0 and steps[-1][-1].as_py() == 199_999
