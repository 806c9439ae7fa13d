"""The Parquet archive (`export --to DIR`): read back with DuckDB and with pyarrow.dataset it
holds exactly the rows of metrics_all; a second export writes only the lines logged since;
both with the CLI opening the database and through a running server."""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from app.cli.main import main
from app.export import layout
from tests.conftest import SAMPLES, wait_for

RUN = "sweep/lr 1e-4"  # a "/" and a space: the partition folder escapes both


def write_lines(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)  # NaN, Infinity as JSON literals


def first_logs(logdir: Path) -> None:
    lines = [{"step": s, "loss": 1 / (s + 1), "elapsed_s": s * 0.5} for s in range(300)]
    lines[7]["loss"], lines[8]["loss"], lines[9]["loss"] = math.nan, math.inf, -math.inf
    lines[10]["loss"] = None
    for line in lines[100:]:
        line["acc"] = line["step"] / 300  # a column from step 100 on: NULL before
    write_lines(logdir / RUN / "metrics.jsonl", lines)
    write_lines(logdir / RUN / "events.jsonl", [{"event": "checkpoint", "step": 100,
                                                 "elapsed_s": 50.0, "path": "ckpt/100"}])
    resumed = [{"step": s, "loss": 2.0} for s in [*range(100), *range(50, 80)]]  # attempt 2
    write_lines(logdir / "plain" / "metrics.jsonl", resumed)
    write_lines(logdir / "odd=1% café" / "metrics.jsonl", [{"step": s, "x": s} for s in range(5)])


def more_logs(logdir: Path) -> int:
    """Lines appended to one run and a new run; returns how many."""
    write_lines(logdir / RUN / "metrics.jsonl",
                [{"step": s, "loss": 0.1, "acc": 0.9, "late_key": s} for s in range(300, 350)])
    write_lines(logdir / "new run" / "metrics.jsonl", [{"step": s, "y": 1.0} for s in range(20)])
    return 70


def cli(*args: str, capsys=None) -> tuple[int, str]:
    code = main(list(args))
    return code, (capsys.readouterr().out if capsys else "")


def ingest(logdir: Path) -> None:
    assert main(["ingest", "--logdir", str(logdir), "--once"]) == 0


def normal(value):
    """NaN compares unequal to itself: compare it as a word."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return [normal(v) for v in value] if isinstance(value, list) else value


def rows(relation: duckdb.DuckDBPyRelation, columns: list[str]) -> list[tuple]:
    """The rows as a sorted list of tuples of ``columns``."""
    chosen = relation.select(*[duckdb.ColumnExpression(c) for c in columns])
    return sorted((tuple(normal(v) for v in row) for row in chosen.fetchall()), key=repr)


def duckdb_archive(con, archive: Path, table: str = "metrics") -> duckdb.DuckDBPyRelation:
    # hive_types: a run named 123 would otherwise read back as an integer
    return con.sql("SELECT * FROM read_parquet($files, hive_partitioning = true, "
                   "union_by_name = true, hive_types = {'run': 'VARCHAR'})",
                   params={"files": f"{archive}/{table}/*/*.parquet"})


def pyarrow_archive(archive: Path, table: str = "metrics") -> pa.Table:
    hive = ds.partitioning(pa.schema([("run", pa.string())]), flavor="hive")
    files = ds.dataset(archive / table, format="parquet", partitioning=hive)
    schema = pa.unify_schemas([f.physical_schema for f in files.get_fragments()]
                              + [pa.schema([("run", pa.string())])])
    return ds.dataset(archive / table, format="parquet", partitioning=hive,
                      schema=schema).to_table()


TABLES = {"metrics": "metrics_all", "events": "events", "attempts": "attempts",
          "incidents": "incidents", "runs": "runs"}


def assert_archive_is_the_database(db: Path, archive: Path) -> dict[str, int]:
    """Each table of the archive, read by DuckDB, holds exactly the database's rows (every
    column, NaN, infinities and NULLs included); metrics read by pyarrow.dataset too.
    Returns the rows per table."""
    con = duckdb.connect(str(db), read_only=True)
    counts = {}
    try:
        for name, source in TABLES.items():
            expected = con.sql(f"SELECT * FROM {source}")
            columns = sorted(expected.columns)
            counts[name] = len(rows(expected, columns))
            if not counts[name]:
                assert not (archive / name).exists()
                continue
            read = duckdb_archive(con, archive, name)
            assert sorted(read.columns) == columns, name
            assert rows(read, columns) == rows(expected, columns), name
        table = pyarrow_archive(archive)
        columns = sorted(table.column_names)
        assert columns == sorted(con.sql("SELECT * FROM metrics_all").columns)
        from_pyarrow = sorted((tuple(normal(r[c]) for c in columns) for r in table.to_pylist()),
                              key=repr)
        assert from_pyarrow == rows(con.sql("SELECT * FROM metrics_all"), columns)
        return counts
    finally:
        con.close()


def parts(archive: Path) -> dict[Path, tuple[int, int]]:
    """Every data file, with its inode and mtime (a file written again changes them)."""
    found = {}
    for path in archive.rglob("*.parquet"):
        stat = path.stat()
        found[path.relative_to(archive)] = (stat.st_ino, stat.st_mtime_ns)
    return found


def test_export_is_metrics_all_and_a_second_export_adds_only_new_lines(tmp_path, capsys):
    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    first_logs(logdir)
    ingest(logdir)
    code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
    assert code == 0, out
    db = logdir / ".cliffwatch" / "cliffwatch.duckdb"
    assert assert_archive_is_the_database(db, archive)["metrics"] == 300 + 130 + 5
    assert (archive / "metrics" / "run=sweep%2Flr%201e-4" / "part-00001.parquet").is_file()
    before = parts(archive)

    added = more_logs(logdir)
    ingest(logdir)
    code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
    assert code == 0, out
    after = parts(archive)
    rewritten = sorted(str(p) for p in before if after[p] != before[p])
    assert rewritten == ["runs/run=sweep%2Flr%201e-4/part-00001.parquet"]  # its last_seen
    new = sorted(str(p) for p in set(after) - set(before) if p.parts[0] == "metrics")
    assert new == ["metrics/run=new%20run/part-00001.parquet",
                   "metrics/run=sweep%2Flr%201e-4/part-00002.parquet"]
    con = duckdb.connect()
    new_rows = con.read_parquet([str(archive / p) for p in new]).count("*").fetchall()[0][0]
    assert new_rows == added
    assert assert_archive_is_the_database(db, archive)["metrics"] == 435 + added

    code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
    assert "nothing new since the last export" in out and parts(archive) == after


def test_a_killed_export_leaves_nothing_a_reader_counts_twice(tmp_path, capsys):
    """A part the manifest never recorded (the export was killed before saving it) and a
    temporary file are what a kill leaves; the next export replaces them, no row twice."""
    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    first_logs(logdir)
    ingest(logdir)
    assert cli("export", "--logdir", str(logdir), "--to", str(archive))[0] == 0
    folder = archive / "metrics" / layout.partition(RUN)
    shutil.copy(folder / "part-00001.parquet", folder / "part-00002.parquet")  # unrecorded
    (folder / ".part-00003.parquet.tmp-99999").write_bytes(b"PAR1 half")
    more_logs(logdir)
    ingest(logdir)
    assert cli("export", "--logdir", str(logdir), "--to", str(archive))[0] == 0
    assert sorted(os.listdir(folder)) == ["part-00001.parquet", "part-00002.parquet"]
    db = logdir / ".cliffwatch" / "cliffwatch.duckdb"
    assert assert_archive_is_the_database(db, archive)["metrics"] == 505


def test_export_through_a_running_server(tmp_path, make_server, capsys):
    """While the server holds the database, the CLI reads it over /api/export (Arrow) and
    writes the same archive, also while a trainer is appending: each export adds only lines
    not yet archived, none twice. Once the server stops, an export that opens the file finds
    no new line, and brings the incidents (rewritten whole when they change) up to date."""
    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    shutil.copytree(SAMPLES / "seed-cliff", logdir / "seed-cliff")
    first_logs(logdir)
    server = make_server(logdir)

    def count() -> int:
        return server.sql("SELECT count(*) FROM metrics_all").json()["rows"][0][0]

    def archived() -> int:
        return duckdb_archive(duckdb.connect(), archive).count("*").fetchall()[0][0]

    wait_for(lambda: count() == 2230 + 435, timeout=30)
    code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
    assert code == 0 and "from the server at" in out, out
    assert archived() == 2230 + 435

    writing, written = threading.Event(), []

    def trainer():  # appends to a live run while the next export reads it
        step = 300
        while not writing.is_set():
            write_lines(logdir / RUN / "metrics.jsonl",
                        [{"step": s, "loss": 0.5} for s in range(step, step + 5)])
            step += 5
            written.append(5)
            time.sleep(0.01)

    thread = threading.Thread(target=trainer)
    thread.start()
    try:
        wait_for(lambda: count() > 2230 + 435, timeout=30)
        code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
        assert code == 0, out
    finally:
        writing.set()
        thread.join()
    total = 2230 + 435 + sum(written)
    wait_for(lambda: count() == total, timeout=30)
    before, in_archive = parts(archive), archived()
    assert 2230 + 435 < in_archive <= total
    code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
    assert code == 0, out
    new = [p for p in set(parts(archive)) - set(before) if p.parts[0] == "metrics"]
    con = duckdb.connect()
    assert con.read_parquet([str(archive / p) for p in new]).count("*").fetchall()[0][0] == \
        total - in_archive
    second = parts(archive)
    server.stop()

    code, out = cli("export", "--logdir", str(logdir), "--to", str(archive), capsys=capsys)
    assert code == 0 and "from database" in out, out
    assert {p for p in set(parts(archive)) - set(second) if p.parts[0] == "metrics"} == set()
    counts = assert_archive_is_the_database(logdir / ".cliffwatch" / "cliffwatch.duckdb",
                                            archive)
    assert counts["metrics"] == total and counts["incidents"] > 0


@pytest.mark.parametrize("run", ["a/b c", "x=y%z", "café/ü", "caf\\xe9", "123", "tab\there",
                                 "q?*:#[]^{}'\"+", ".", "__HIVE_DEFAULT_PARTITION__"])
def test_partition_names_read_back_as_the_run(tmp_path, run):
    folder = tmp_path / "metrics" / layout.partition(run)
    folder.mkdir(parents=True)
    layout.write_parquet(pa.table({"x": [1]}).to_reader(), folder / "part-00001.parquet")
    read = duckdb_archive(duckdb.connect(), tmp_path)
    assert read.select("run").fetchall() == [(run,)]
    if run != layout.HIVE_NULL:  # pyarrow reads that name as NULL however it is escaped
        assert pyarrow_archive(tmp_path).column("run").to_pylist() == [run]


def test_bad_destinations_are_refused_with_what_to_do(tmp_path, capsys):
    logdir = tmp_path / "logs"
    write_lines(logdir / "r" / "metrics.jsonl", [{"step": 1, "loss": 1.0}])
    ingest(logdir)
    capsys.readouterr()
    inside = logdir / "archive"
    assert main(["export", "--logdir", str(logdir), "--to", str(inside)]) == 2
    assert "inside the log directory" in capsys.readouterr().err and not inside.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["export", "--logdir", str(logdir), "--to", str(blocker / "archive")]) == 2
    assert "cannot write to --to" in capsys.readouterr().err
    assert main(["export", "--logdir", str(logdir), "--to", str(blocker)]) == 2
    assert "is a file" in capsys.readouterr().err
    home = tmp_path / "home"
    (home / "notes.txt").parent.mkdir()
    (home / "notes.txt").write_text("mine")
    assert main(["export", "--logdir", str(logdir), "--to", str(home)]) == 2
    assert "no cliffwatch archive" in capsys.readouterr().err


def test_an_archive_continues_only_the_database_it_was_written_from(tmp_path, capsys):
    """A log directory ingested afresh numbers its rows from 0 again: continuing the archive
    from it would skip rows, so it is refused."""
    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    first_logs(logdir)
    ingest(logdir)
    assert main(["export", "--logdir", str(logdir), "--to", str(archive)]) == 0
    shutil.rmtree(logdir / ".cliffwatch")
    ingest(logdir)
    capsys.readouterr()
    assert main(["export", "--logdir", str(logdir), "--to", str(archive)]) == 2
    assert "exported from another database" in capsys.readouterr().err


def test_one_export_at_a_time_per_archive(tmp_path, capsys):
    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    write_lines(logdir / "r" / "metrics.jsonl", [{"step": 1, "loss": 1.0}])
    ingest(logdir)
    archive.mkdir()
    with (archive / "_cliffwatch_export.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # what a running export holds
        capsys.readouterr()
        assert main(["export", "--logdir", str(logdir), "--to", str(archive)]) == 2
        assert "another export is writing" in capsys.readouterr().err
    assert main(["export", "--logdir", str(logdir), "--to", str(archive)]) == 0


def many_runs(logdir: Path, n: int, lines: int = 5) -> None:
    """``n`` small runs, as in a team's folder: each a few lines, one with an event."""
    for i in range(n):
        write_lines(logdir / "team" / f"run {i:03d}" / "metrics.jsonl",
                    [{"step": s, "loss": 1 / (s + 1 + i)} for s in range(lines)])
    write_lines(logdir / "team" / "run 007" / "events.jsonl",
                [{"event": "checkpoint", "step": 3, "path": "ckpt/3"}])


def counting(monkeypatch, owner, name: str) -> list:
    """Count the calls of ``owner.name`` (it still does its work): a list of one per call."""
    calls, real = [], getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def one_part_per_run(archive: Path, runs: int) -> None:
    for table in ("metrics", "attempts", "runs"):
        found = sorted(p.relative_to(archive / table).parent.name
                       for p in (archive / table).rglob("*.parquet"))
        assert len(found) == runs and len(set(found)) == runs, table
        assert {p.name for p in (archive / table).rglob("*.parquet")} == {"part-00001.parquet"}


def test_a_first_export_of_many_small_runs_reads_them_a_batch_at_a_time(tmp_path, capsys,
                                                                       monkeypatch):
    """200 runs cost a few queries per table, not one per run and table (a first export of a
    team's thousands of runs was mostly that), and the archive is still metrics_all, one
    part per run; a second export after more lines adds only those, again in a batch."""
    from app.db import queries

    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    many_runs(logdir, 200)
    ingest(logdir)
    with monkeypatch.context() as patch:
        calls = counting(patch, queries, "execute")
        assert cli("export", "--logdir", str(logdir), "--to", str(archive))[0] == 0
    assert len(calls) <= 4 * 7, len(calls)  # per table: marks, columns, one batch (7 tables)
    db = logdir / ".cliffwatch" / "cliffwatch.duckdb"
    assert assert_archive_is_the_database(db, archive)["metrics"] == 200 * 5
    one_part_per_run(archive, 200)

    for i in range(0, 200, 2):  # half the runs log 3 lines more
        write_lines(logdir / "team" / f"run {i:03d}" / "metrics.jsonl",
                    [{"step": s, "loss": 0.5} for s in range(5, 8)])
    ingest(logdir)
    before = parts(archive)
    with monkeypatch.context() as patch:
        calls = counting(patch, queries, "execute")
        assert cli("export", "--logdir", str(logdir), "--to", str(archive))[0] == 0
    assert len(calls) <= 4 * 7, len(calls)
    new = [p for p in set(parts(archive)) - set(before) if p.parts[0] == "metrics"]
    assert len(new) == 100 and {p.name for p in new} == {"part-00002.parquet"}
    assert assert_archive_is_the_database(db, archive)["metrics"] == 200 * 5 + 100 * 3


def test_a_run_bigger_than_a_batch_is_streamed_alone(tmp_path, monkeypatch):
    """With batches of 100 rows: 60 runs of 5 lines go 20 to a query, and a run of 450 lines
    is read by a query of its own and written 100 rows at a time (its row groups)."""
    from app.db import queries
    from app.export import tables

    logdir, archive = tmp_path / "logs", tmp_path / "archive"
    many_runs(logdir, 60)
    write_lines(logdir / "big" / "metrics.jsonl", [{"step": s, "loss": 1.0} for s in range(450)])
    ingest(logdir)
    monkeypatch.setattr(tables, "BATCH_ROWS", (100, 100))  # what 40,000 columns would give
    calls = []
    real = queries.execute

    def counted(cursor, name, *args, **kwargs):
        calls.append(name)
        return real(cursor, name, *args, **kwargs)

    monkeypatch.setattr(queries, "execute", counted)
    assert main(["export", "--logdir", str(logdir), "--to", str(archive)]) == 0
    # the big run, alone: its columns (LIMIT 0), then a page per row group
    assert calls.count("export/metrics_rows") == 1 + 5
    assert calls.count("export/metrics_batch") == 3  # 60 x 5 lines, 100 rows a query
    assert calls.count("export/runs_batch") == 1  # 61 rows
    big = pq.ParquetFile(archive / "metrics" / "run=big" / "part-00001.parquet")
    assert [big.metadata.row_group(i).num_rows for i in range(big.num_row_groups)] == \
        [100, 100, 100, 100, 50]
    counts = assert_archive_is_the_database(logdir / ".cliffwatch" / "cliffwatch.duckdb",
                                            archive)
    assert counts["metrics"] == 60 * 5 + 450


def test_many_small_runs_through_a_server_cost_a_request_per_batch(tmp_path, make_server,
                                                                  monkeypatch):
    """Through a running server, 200 runs cost a few requests (one POST per table and batch
    of runs), not one per run and table, and give the archive the CLI writes from the file."""
    import httpx

    logdir, served, local = tmp_path / "logs", tmp_path / "served", tmp_path / "local"
    many_runs(logdir, 200)
    server = make_server(logdir)
    wait_for(lambda: server.sql("SELECT count(*) FROM metrics_all").json()["rows"][0][0]
             == 1000, timeout=60)
    with monkeypatch.context() as patch:
        requests = counting(patch, httpx.Client, "send")
        assert main(["export", "--logdir", str(logdir), "--to", str(served)]) == 0
    assert len(requests) <= 2 + 7, len(requests)  # health, marks, a batch per table
    one_part_per_run(served, 200)
    refused = httpx.post(f"{server.url}/api/export/metrics", json={"runs": ["run 000"]})
    assert refused.status_code == 400 and '"after"' in refused.json()["error"]

    # a run with more new lines than a batch holds is streamed alone (GET ?run=...)
    # the run's loss goes on falling (a jump to a flat 0.5 would be a divergence, whose
    # incident the served export could race)
    write_lines(logdir / "team" / "run 003" / "metrics.jsonl",
                [{"step": s, "loss": 1 / (s + 4)} for s in range(5, 155)])
    wait_for(lambda: server.sql("SELECT count(*) FROM metrics_all").json()["rows"][0][0]
             == 1150, timeout=60)
    with monkeypatch.context() as patch:
        from app.export import tables

        patch.setattr(tables, "BATCH_ROWS", (100, 100))
        sent = []
        real = httpx.Client.send

        def send(client, request, **kwargs):
            sent.append((request.method, request.url.path))
            return real(client, request, **kwargs)

        patch.setattr(httpx.Client, "send", send)
        assert main(["export", "--logdir", str(logdir), "--to", str(served)]) == 0
    assert sent.count(("GET", "/api/export/metrics")) == 1
    assert sent.count(("POST", "/api/export/metrics")) == 0
    server.stop()

    assert main(["export", "--logdir", str(logdir), "--to", str(local)]) == 0
    con = duckdb.connect()
    for table in ("metrics", "events", "attempts"):
        columns = sorted(duckdb_archive(con, local, table).columns)
        assert rows(duckdb_archive(con, served, table), columns) == \
            rows(duckdb_archive(con, local, table), columns), table
    assert {p.parent for p in parts(served)} == {p.parent for p in parts(local)}
