"""Skip or retry is decided in one place (issue 22): store.smaller says what sends bytes from
the fast path or the batch to a smaller reading, and out of memory is one of them, never a
line's fault; only the careful path skips a line, for its content (store.content_error)."""

from __future__ import annotations

import json
import time

import duckdb

from app.ingest import store
from tests.app.test_ingest_bad_input import ingest, query


def _write(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_out_of_memory_skips_no_line_beside_the_batch(tmp_path):
    # into a 200-column table in 64MB the big log runs out of memory (measured: it is
    # retried with fewer bytes), while the twenty small ones go through the batch or alone:
    # every line arrives, none recorded as refused
    logs = tmp_path / "logs"
    _write(logs / "wide" / "metrics.jsonl",
           [{"step": 1, "loss": 1.0, "acc": 0.1} | {f"k{k}": 1.0 for k in range(200)}])
    ingest(logs).close()
    _write(logs / "big" / "metrics.jsonl",
           [{"step": s, "loss": 1.0, "acc": 0.1} for s in range(20_000)])
    for run in range(20):
        _write(logs / f"small{run}" / "metrics.jsonl",
               [{"step": s, "loss": 1.0, "acc": 0.1} for s in range(200)])
    with ingest(logs, memory_limit="64MB") as mon:
        deadline = time.monotonic() + 60
        while (mon.tailer.failure or mon.tailer.behind) and time.monotonic() < deadline:
            time.sleep(0.05)
            mon.tailer.tick()
        assert mon.tailer.failure is None
        assert query(mon, "SELECT count(*) FROM metrics_all WHERE run = 'big'") == [(20_000,)]
        assert query(mon, "SELECT count(*) FROM metrics_all WHERE run LIKE 'small%'") \
            == [(20 * 200,)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_the_rule_itself():
    # the same answers whichever path asks (fast.py, batch.py): smaller for out of memory,
    # I/O and a refusal; raised for a database DuckDB invalidated; never a content error
    out_of_memory = duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate")
    assert store.smaller(out_of_memory) and not store.content_error(out_of_memory)
    assert store.smaller(store.Refused("a step does not rise"))
    assert store.smaller(OSError("No space left on device"))
    assert not store.smaller(duckdb.FatalException("the database has been invalidated"))
    assert not store.smaller(store.Uncertain(["r/metrics.jsonl"]))
