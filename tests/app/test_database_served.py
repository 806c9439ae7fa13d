"""One database serves one log directory (app/db/served.py), through the real CLI.

Found on an H200 run (stop 36): `diagnose --db FILE` of two run folders, one after the other,
put both runs' lines into one run "." and marked the first folder's files deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from tests.conftest import run_cli


def _run(folder: Path, losses: list[float], start: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "metrics.jsonl").open("a") as handle:
        for step, loss in enumerate(losses, start):
            handle.write(json.dumps({"step": step, "loss": loss, "elapsed_s": step * 0.5}) + "\n")
    return folder


def _stored(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        lines = con.execute("SELECT run, count(*), max(step) FROM metrics_all GROUP BY ALL "
                        "ORDER BY ALL").fetchall()
        gone = con.execute("SELECT count(*) FROM files WHERE state = 'deleted'").fetchone()[0]
    return [*lines, ("deleted files", gone)]


def test_a_database_given_to_a_second_log_directory_is_refused_and_keeps_the_first(tmp_path):
    db = tmp_path / "kept" / "c.duckdb"
    first, second = tmp_path / "a", tmp_path / "b"
    _run(first / "r1", [1.0] * 5)
    _run(second / "r2", [2.0] * 7)
    assert run_cli("ingest", "--logdir", str(first), "--db", str(db), "--once").returncode == 0
    before = _stored(db)
    assert before == [("r1", 5, 4), ("deleted files", 0)]
    refused = run_cli("ingest", "--logdir", str(second), "--db", str(db), "--once")
    assert refused.returncode != 0
    assert f"{db} holds the runs of {first}, not of {second}" in refused.stderr
    assert "Leave out --db" in refused.stderr
    assert _stored(db) == before
    assert not (second / ".cliffwatch").exists()


def test_diagnose_of_two_run_folders_with_one_db_never_mixes_them(tmp_path):
    db = tmp_path / "c.duckdb"
    calm = _run(tmp_path / "runs" / "calm", [1.0 - i * 0.01 for i in range(40)])
    spiky = _run(tmp_path / "runs" / "spiky", [1.0] * 30 + [40.0] + [1.0] * 9)
    first = run_cli("diagnose", "--db", str(db), str(calm))
    assert first.returncode == 0, first.stderr
    assert "calm" in first.stdout and "SPIKE" not in first.stdout
    second = run_cli("diagnose", "--db", str(db), str(spiky))
    assert second.returncode != 0
    assert f"holds the runs of {calm}, not of {spiky}" in second.stderr
    assert _stored(db) == [(".", 40, 39), ("deleted files", 0)]
    alone = run_cli("diagnose", str(spiky))  # its own scratch database: the spike is found
    assert "SPIKE in loss at step 30" in alone.stdout, alone.stdout + alone.stderr


def test_the_same_folder_renamed_or_copied_with_its_database_reads_on(tmp_path):
    logs = tmp_path / "logs"
    run = _run(logs / "r", [1.0] * 5)
    db = tmp_path / "c.duckdb"
    assert run_cli("ingest", "--logdir", str(logs), "--db", str(db), "--once").returncode == 0
    moved = logs.rename(tmp_path / "moved")  # same device and inode: the same folder
    _run(moved / "r", [0.5] * 3, start=5)
    done = run_cli("ingest", "--logdir", str(moved), "--db", str(db), "--once")
    assert done.returncode == 0, done.stderr
    assert "ingested 3 rows" in done.stdout
    assert _stored(db) == [("r", 8, 7), ("deleted files", 0)]
    assert not run.exists()
    # the default database lives in the folder: a copy of the folder takes it along
    own = tmp_path / "own"
    _run(own / "r", [1.0] * 4)
    assert run_cli("ingest", "--logdir", str(own), "--once").returncode == 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in sorted(own.rglob("*")):
        target = copy / path.relative_to(own)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            target.write_bytes(path.read_bytes())
    assert run_cli("ingest", "--logdir", str(copy), "--once").returncode == 0
    assert _stored(copy / ".cliffwatch" / "cliffwatch.duckdb")[0][:2] == ("r", 4)
