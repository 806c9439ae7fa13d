"""A large trainer_state.json (issue 18, finding 16): a rewrite reads only the entries after
those stored, and ``ingest --once`` says the rows it truly stored (it said "ingested 0 rows"
though 2.3 M were stored). bench/hf_state.py prints the time and memory of both reads."""

from __future__ import annotations

import json

import duckdb

from app.ingest.formats import EVENT, hf_state
from tests.conftest import run_cli


def history(steps: range) -> list[dict]:
    out = []
    for step in steps:
        out.append({"epoch": step / 1000, "grad_norm": 1.5, "learning_rate": 2e-5,
                    "loss": 1.0 / step, "step": step})
        if step % 50 == 0:
            out.append({"epoch": step / 1000, "eval_loss": 0.5, "step": step})
    return out


def state(entries: list[dict]) -> bytes:
    """As the Trainer writes it: the members before log_history change length every save."""
    return (json.dumps({"epoch": entries[-1]["epoch"], "global_step": entries[-1]["step"],
                        "log_history": entries, "num_train_epochs": 3, "total_flos": 1e18},
                       indent=2, sort_keys=True) + "\n").encode()


def test_ingest_once_says_the_rows_it_stored_and_a_rewrite_adds_only_the_new(tmp_path):
    logs, db = tmp_path / "logs", str(tmp_path / "cw.duckdb")
    path = logs / "hf" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    entries = history(range(1, 2001))
    path.write_bytes(state(entries))
    first = run_cli("ingest", "--logdir", str(logs), "--db", db, "--once")
    assert "ingested 2000 rows from 1 files; 0 new ingest errors" in first.stdout, first.stdout
    entries += history(range(2001, 2004))
    path.write_bytes(state(entries))  # a save: the whole file again, 3 entries longer
    again = run_cli("ingest", "--logdir", str(logs), "--db", db, "--once")
    assert "ingested 3 rows from 1 files; 0 new ingest errors" in again.stdout, again.stdout
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT step), max(step) FROM metric_rows"
                           ).fetchall() == [(2003, 2003, 2003)]
        assert con.execute("SELECT count(*) FROM eval_rows").fetchall() == [(40,)]
        assert con.execute("SELECT count(*) FROM attempts").fetchall() == [(1,)]


class Counted:
    """A file's bytes, counting what a read takes of them."""

    def __init__(self, data: bytes):
        self.data, self.taken = data, 0

    def __call__(self, offset: int, size: int) -> bytes:
        taken = self.data[offset:offset + size]
        self.taken += len(taken)
        return taken


def rows(parts) -> list[tuple[str, object]]:
    return [(r.kind, r.data["step"]) for p in parts for r in p.records if r.kind != EVENT]


def test_a_rewrite_reads_the_bytes_after_the_stored_entries_not_the_file():
    entries = history(range(1, 20_001))
    first = Counted(state(entries))
    parts = list(hf_state.read(first, len(first.data), window=256 << 10))
    assert len(parts) > 10 and [p.done for p in parts][-2:] == [False, True]
    assert rows(parts) == [(("eval" if "eval_loss" in e else "train"), e["step"])
                           for e in entries]
    stored, resume = parts[-1].entries, parts[-1].resume
    entries += history(range(20_001, 20_004))
    again = Counted(state(entries))
    more = list(hf_state.read(again, len(again.data), stored, resume, window=256 << 10))
    assert rows(more) == [("train", 20_001), ("train", 20_002), ("train", 20_003)]
    assert more[0].status == hf_state.OK and more[-1].entries == len(entries)
    assert again.taken < 100 << 10 < len(again.data) // 10  # the head, a hash, the new part


def test_a_read_stopped_between_windows_goes_on_from_the_last_one_stored():
    """Each window is its own transaction; after a crash, the next read starts after the
    last committed one, with nothing lost or read twice, epoch boundaries included."""
    data = state(history(range(1, 5001)))
    source = Counted(data)
    parts = list(hf_state.read(source, len(data), window=64 << 10))
    whole = rows(parts)
    events = [r.data for p in parts for r in p.records if r.kind == EVENT]
    for stop in (1, len(parts) // 2, len(parts) - 2):
        done = parts[:stop]
        rest = list(hf_state.read(source, len(data), done[-1].entries, done[-1].resume,
                                  window=64 << 10))
        assert rows(done) + rows(rest) == whole
        assert [r.data for p in done + rest for r in p.records if r.kind == EVENT] == events
    assert events == [{"event": "epoch_start", "step": s, "epoch": e}
                      for s, e in ((1000, 1), (2000, 2))]  # not at 3000: the end (3 epochs)
