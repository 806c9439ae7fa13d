"""The same bytes through both ingest paths store the same tables.

A run's files grow in random pieces: mostly clean lines (which the fast path takes once a
piece is over 256 KiB), with resumes, keys first seen past DuckDB's 20,480-line sample,
string and boolean values, blank lines, event lines, CRLF line ends and lines left
unfinished until the next piece. One tailer stores them as it would in production (fast path
where it can), another with the careful path only. Every table a user can query must come
out the same. The careful path's line-by-line backstop must also agree with its batch.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from app import settings as settings_mod
from app.db.database import Database
from app.ingest import careful
from app.ingest.openfile import open_log
from app.ingest.segment import Segment
from app.ingest.store import Store
from app.ingest.tail import Tailer

FILES = ("r/metrics.jsonl", "r/rank1.jsonl", "r/events.jsonl")


class Lines:
    """A random log, line by line (seeded: a failure replays)."""

    def __init__(self, rng: random.Random, events_only: bool = False):
        self.rng, self.events_only = rng, events_only
        self.step, self.count, self.keys = 0, 0, ["loss", "lr"]
        self.noisy = False  # odd lines come in stretches, so some big pieces are clean

    def next(self) -> bytes:
        rng, self.count = self.rng, self.count + 1
        if self.events_only:
            self.step += rng.randint(1, 50)
            return self._encode({"event": rng.choice(["checkpoint_start", "checkpoint_end",
                                                      "epoch_end"]), "step": self.step})
        if self.count > 20_480 and len(self.keys) < 6 and rng.random() < 2e-4:
            self.keys.append(f"late_{len(self.keys)}")  # a key DuckDB's sample never saw
        self.noisy ^= rng.random() < (1 / 2_000 if self.noisy else 1 / 40_000)
        if self.count in (25_000, 45_000) or rng.random() < 1 / 30_000:
            self.step = max(1, self.step - rng.randint(1, 500))  # resumed from a checkpoint
        self.step += 1
        line = {"step": self.step, "elapsed_s": self.step * 0.25}
        line |= {k: round(rng.random(), 6) for k in self.keys if rng.random() < 0.9}
        odd = rng.random() if self.noisy else 0.0
        if odd > 1 - 1e-3:
            line["loss"] = rng.choice(["nan?", "0.5", True, None])  # a value that is no number
        elif odd > 1 - 2e-3:
            return b"   "  # a blank line
        elif odd > 1 - 3e-3:
            return self._encode({"event": "checkpoint_start", "step": self.step})
        elif odd > 1 - 4e-3:
            return self._encode(line) + b"\r"  # a CRLF line end
        return self._encode(line)

    @staticmethod
    def _encode(obj: dict) -> bytes:
        return json.dumps(obj).encode()


def pieces(rng: random.Random, lines: Lines, total: int):
    """The file's bytes in random pieces; a piece may end inside a line."""
    data = b"".join(lines.next() + b"\n" for _ in range(total))
    at = 0
    while at < len(data):
        size = rng.choice([rng.randint(1, 2_000), rng.randint(300_000, 900_000)])
        yield data[at:at + size]
        at += size


def tailer(tmp_path: Path, logs: Path, name: str, fast_path: bool) -> Tailer:
    scratch = tmp_path / f"scratch-{name}"
    scratch.mkdir()
    db = Database(tmp_path / f"{name}.duckdb", allowed_dirs=[scratch])
    settings = dataclasses.replace(settings_mod.resolve(), chunk_bytes=2 << 20)
    return Tailer(db, logs, settings, scratch, fast_path=fast_path)


def tables(db: Database) -> dict[str, list]:
    cur = db.cursor()
    columns = sorted(r[0] for r in cur.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'metric_rows' "
        "AND column_name NOT IN ('ingested_at')").fetchall())
    rank_columns = sorted(r[0] for r in cur.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'ranks_all' "
        "AND column_name NOT IN ('ingested_at')").fetchall())

    def rows(sql: str) -> list:
        return cur.execute(sql).fetchall()

    quoted = ", ".join(f'"{c}"' for c in columns)
    return {
        "metric columns": columns,
        "metrics": rows(f"SELECT {quoted} FROM metric_rows ORDER BY rowid"),
        "rank columns": rank_columns,
        "ranks": rows(f"SELECT {', '.join(rank_columns)} FROM ranks_all ORDER BY rowid"),
        "attempts": rows("SELECT run, attempt, start_step, prev_step, reason, file_id FROM "
                         "attempts ORDER BY file_id, attempt"),
        "events": rows('SELECT run, kind, step, data, file_id, "offset" FROM events '
                       'ORDER BY file_id, "offset"'),
        "errors": rows('SELECT run, file, "offset", severity, reason, excerpt FROM '
                       'ingest_errors ORDER BY file, "offset", reason'),
        "files": rows('SELECT path, kind, size, "offset", head, attempt, last_step, lines, '
                      "crlf_reported, tail FROM files ORDER BY path"),
        "runs": rows("SELECT run, status FROM runs ORDER BY run"),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_both_paths_store_the_same_tables(tmp_path, seed):
    rng = random.Random(seed)
    logs = tmp_path / "logs"
    (logs / "r").mkdir(parents=True)
    streams = {
        "r/metrics.jsonl": pieces(rng, Lines(rng), 60_000),
        "r/rank1.jsonl": pieces(rng, Lines(rng), 25_000),
        "r/events.jsonl": pieces(rng, Lines(rng, events_only=True), 300),
    }
    fast, slow = tailer(tmp_path, logs, "fast", True), tailer(tmp_path, logs, "slow", False)
    live = dict(streams)
    while live:
        name = rng.choice(sorted(live))
        piece = next(live[name], None)
        if piece is None:
            del live[name]
            continue
        with open(logs / name, "ab") as handle:
            handle.write(piece)
        fast.catch_up()
        slow.catch_up()
    assert fast.rows_by_path["fast"] > 0, "the fast path took no piece: the test tests nothing"
    assert fast.rows_by_path["careful"] > 0 and slow.rows_by_path["fast"] == 0
    stored, expected = tables(fast.db), tables(slow.db)
    for table in expected:
        assert stored[table] == expected[table], table
    assert len(expected["errors"]) > 0 and len(expected["attempts"]) >= 3
    fast.db.close()
    slow.db.close()


@pytest.mark.parametrize("kind", ["metrics", "rank", "events"])
@pytest.mark.parametrize("reason", [None, "file_truncated"])
def test_line_by_line_backstop_stores_what_the_batch_stores(tmp_path, kind, reason):
    """The backstop (each line in its own transaction) reads lines as the batch does: an
    event line in a rank file is ignored with a warning, a reset and CRLF are reported once."""
    name = {"metrics": "metrics.jsonl", "rank": "rank1.jsonl", "events": "events.jsonl"}[kind]
    logs = tmp_path / "logs"
    (logs / "r").mkdir(parents=True)
    (logs / "r" / name).write_bytes(
        b'{"step": 1, "loss": 1.0}\r\n{"event": "checkpoint_start", "step": 1}\n'
        b'{"step": 2, "loss": "x"}\n\n{"step": 1, "loss": 0.5}\r\n{"step": 2, "loss": 0.25}\n')
    stored = {}
    for way in ("batch", "line_by_line"):
        db = Database(tmp_path / f"{way}.duckdb")
        store = Store(db)
        state = store.add_file("r", f"r/{name}", kind)
        with open_log(logs.resolve(), f"r/{name}") as handle:
            start = dataclasses.replace(state, inode=handle.info.st_ino,
                                        mtime=handle.info.st_mtime)
            segment = Segment(state, start, handle, handle.read(0, 1 << 20), reason)
            if way == "batch":
                careful.store(store, segment)
            else:
                careful.line_by_line(store, segment)
        stored[way] = tables(db)
        db.close()
    assert stored["line_by_line"] == stored["batch"]
    reasons = [e[4] for e in stored["batch"]["errors"]]
    assert sum("CRLF" in r for r in reasons) == 1
    assert sum("read again from the start" in r for r in reasons) == (reason is not None)
    if kind == "rank":
        assert stored["batch"]["events"] == []
        assert any("event line in a rank file" in r for r in reasons)
