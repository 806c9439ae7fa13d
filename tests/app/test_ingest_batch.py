"""Many new small logs are stored a group to a transaction (app/ingest/batch.py), and what
the batch stores is what the careful path stores one file at a time.

Each test lets a production tailer and a careful-only one catch up the same runs folder and
compares every table a user can query. How much work the batch took is counted in rows (the
fast path never takes a log under 256 KiB alone) and in transactions (the files a
transaction commits share their ``updated_at``, its start time)."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from app import settings as settings_mod
from app.db.database import Database
from app.ingest.store import Store
from app.ingest.tail import Tailer
from tests.app.test_ingest_both_paths import tables


def tailer(tmp_path: Path, logs: Path, name: str, fast_path: bool, **settings) -> Tailer:
    scratch = tmp_path / f"scratch-{name}"
    scratch.mkdir()
    db = Database(tmp_path / f"{name}.duckdb", allowed_dirs=[scratch])
    return Tailer(db, logs, dataclasses.replace(settings_mod.resolve(), **settings), scratch,
                  fast_path=fast_path)


def by_file(db: Database) -> dict[str, list]:
    """Every table (test_ingest_both_paths.tables), rows in each file's own order: the batch
    stores the files a tick leaves in another order than one by one."""
    found = tables(db)
    columns = ", ".join(f'"{c}"' for c in found["metric columns"])
    found["metrics"] = db.cursor().execute(
        f"SELECT {columns} FROM metric_rows ORDER BY file_id, rowid").fetchall()
    return found


def write(path: Path, lines: list[dict | bytes], unfinished: bytes = b"") -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join((line if isinstance(line, bytes) else json.dumps(line).encode())
                              + b"\n" for line in lines) + unfinished)
    return sum(isinstance(line, dict) for line in lines)


def clean_run(rng: random.Random, lines: int, keys: list[str]) -> list[dict]:
    return [{"step": step, **{k: round(rng.random(), 6) for k in keys}}
            for step in range(1, lines + 1)]


def odd_runs(rng: random.Random) -> dict[str, list]:
    """Logs the batch must leave to the careful path, whole or in part."""
    base = clean_run(rng, 80, ["loss"])
    return {
        "string": [*base[:40], {"step": 41, "loss": "0.5"}, *base[41:]],
        "boolean": [*base[:10], {"step": 11, "loss": True}, *base[11:]],
        "blank": [*base[:30], b"   ", *base[30:]],
        "resumed": base[:50] + clean_run(rng, 20, ["loss"]),
        "infinity": [*base[:20], b'{"step": 21, "loss": 1e400}', *base[21:]],
        "crlf": [json.dumps(line).encode() + b"\r" for line in base],
        "event": [*base[:5], {"event": "checkpoint_start", "step": 5}, *base[5:]],
        "our_key": [{"File_ID": 7, **line} for line in base],
        "spelled": [{"step": line["step"], "LOSS": line["loss"]} for line in base],
        "late_key": base[:60] + [{**line, "val_loss": 0.5} for line in base[60:]],
    }


def test_many_new_logs_are_stored_together_as_the_careful_path_stores_them(tmp_path):
    rng = random.Random(12)
    logs = tmp_path / "logs"
    clean = 0
    for run in range(40):
        keys = ["loss", "lr"] + (["accuracy"] if run % 3 == 0 else [])
        clean += write(logs / f"run{run:02d}" / "metrics.jsonl", clean_run(rng, 200, keys))
    for name, lines in odd_runs(rng).items():
        write(logs / f"odd-{name}" / "metrics.jsonl", lines)
    write(logs / "odd-unfinished" / "metrics.jsonl", clean_run(rng, 80, ["loss"]), b'{"st')
    for name in ("resumed", "infinity"):  # after the clean runs: found out in their group
        write(logs / f"zz-{name}" / "metrics.jsonl", odd_runs(rng)[name])
    fast, slow = tailer(tmp_path, logs, "fast", True), tailer(tmp_path, logs, "slow", False)
    fast.catch_up()
    slow.catch_up()
    stored, expected = by_file(fast.db), by_file(slow.db)
    for table in expected:
        assert stored[table] == expected[table], table
    # the clean runs (and the odd logs the batch can vouch for) went by the batch: the fast
    # path takes no log this small alone, so before the batch all of these were careful rows
    assert fast.rows_by_path["fast"] >= clean and slow.rows_by_path["fast"] == 0
    transactions = fast.db.cursor().execute(
        "SELECT count(DISTINCT updated_at) FROM files WHERE run LIKE 'run%'").fetchone()[0]
    assert transactions <= 8  # one group, split in halves around the odd logs (not 40)
    reasons = " ".join(e[4] for e in expected["errors"])
    assert "CRLF" in reasons and "boolean" in reasons and "Infinity" in reasons
    assert fast.pending_partial == 1 and fast.rows_by_path["careful"] > 0
    fast.db.close()
    slow.db.close()


def test_a_key_past_the_sample_of_a_group_is_stored_not_dropped(tmp_path):
    """DuckDB's reader drops a key it did not sample when it reads several files; the batch
    reads one file whose first line names every first-line key, and a key no first line
    holds, 20,480 lines in, must fail the read and be stored (by another way), not lost."""
    rng = random.Random(5)
    logs = tmp_path / "logs"
    for run in range(30):
        lines = clean_run(rng, 1000, ["loss"])
        if run == 27:  # about line 27,500 of the group
            lines = lines[:500] + [{**line, "late": 1.5} for line in lines[500:]]
        if run == 28:
            lines = [{**line, "extra": 2.5} for line in lines]  # in its first line: batched
        write(logs / f"run{run:02d}" / "metrics.jsonl", lines)
    fast, slow = tailer(tmp_path, logs, "fast", True), tailer(tmp_path, logs, "slow", False)
    fast.catch_up()
    slow.catch_up()
    stored, expected = by_file(fast.db), by_file(slow.db)
    for table in expected:
        assert stored[table] == expected[table], table
    late = fast.db.cursor().execute("SELECT count(late), count(extra) FROM metric_rows")
    assert late.fetchone() == (500, 1000)
    assert fast.rows_by_path["fast"] >= 28_000
    fast.db.close()
    slow.db.close()


def test_groups_follow_the_byte_budget_and_each_commits_its_files_positions(tmp_path):
    """With a small budget each group is its own transaction, and every file's row says
    where it was read to (offset = size, its lines and last step), as one by one."""
    rng = random.Random(7)
    logs = tmp_path / "logs"
    for run in range(60):
        write(logs / f"run{run:02d}" / "metrics.jsonl", clean_run(rng, 400, ["loss", "lr"]))
    fast = tailer(tmp_path, logs, "fast", True, chunk_bytes=1)  # budget: one line's 1 MiB
    slow = tailer(tmp_path, logs, "slow", False)
    assert fast.catch_up() == slow.catch_up() == 60 * 400
    stored, expected = by_file(fast.db), by_file(slow.db)
    for table in expected:
        assert stored[table] == expected[table], table
    cur = fast.db.cursor()
    transactions = cur.execute("SELECT count(DISTINCT updated_at) FROM files").fetchone()
    size = sum(p.stat().st_size for p in logs.rglob("*.jsonl"))
    assert size / (1 << 20) <= transactions[0] <= size / (1 << 20) + 2
    assert cur.execute('SELECT count(*) FROM files WHERE "offset" = size AND lines = 400 '
                       "AND last_step = 400 AND attempt = 1").fetchone()[0] == 60
    assert fast.catch_up() == 0 and fast.rows_by_path == {"fast": 60 * 400, "careful": 0}
    fast.db.close()
    slow.db.close()


def test_add_files_registers_many_in_one_statement(tmp_path):
    db = Database(tmp_path / "db.duckdb")
    store = Store(db)
    found = [(f"run{i}", f"run{i}/metrics.jsonl", "metrics") for i in range(50)]
    states = store.add_files(found)
    assert [(s.run, s.path, s.kind) for s in states] == found
    assert len({s.file_id for s in states}) == 50
    assert {(s.file_id, s.path) for s in states} == {
        (f.file_id, f.path) for f in store.load_files()}
    db.close()
