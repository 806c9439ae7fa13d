"""Lines that break the parser are recorded, never fatal (issue 7, sections 3 and 5): each goes
to ingest_errors with its byte offset, the good lines around it are stored, and the file's
offset moves past it. Values read as something else (``true`` as 1.0, ``1e400`` as Infinity)
are kept and say so."""

from __future__ import annotations

import copy
import json
import logging
import random

import duckdb
import pytest

from app.db.database import Database
from app.ingest import chunk as bulk
from app.ingest.parse import Parsed, event_text, parse_lines
from app.ingest.store import Batch, Store
from tests.app.test_ingest_bad_input import GOOD_AFTER, GOOD_BEFORE, ingest, query

DEEP = b"[" * 5000 + b"]" * 5000  # past orjson's depth limit and Python's recursion limit
FAIRLY_DEEP = b"[" * 900 + b"]" * 900  # read by both decoders, too deep for json.dumps

# (name, bad line, severity, words in the reason, is the line kept)
CASES = [
    ("surrogate_key", b'{"step": 2, "\\ud800": 1.0}', "warning", "lone surrogate", True),
    ("surrogate_event", b'{"event": "\\udc00", "step": 2}', "warning", "lone surrogate", False),
    ("deep", b'{"step": 2, "a": ' + DEEP + b"}", "error", "nested too deeply", False),
    ("deep_event", b'{"event": "x", "step": 2, "d": ' + FAIRLY_DEEP + b"}", "error",
     "more than 64 levels", False),
    ("fairly_deep_metric", b'{"step": 2, "a": ' + FAIRLY_DEEP + b"}", "warning",
     "not a number", True),
    ("huge_integer", b'{"step": 2, "a": 1' + b"0" * 5000 + b"}", "warning",
     "beyond the range of a double; stored as Infinity", True),
    ("overflow", b'{"step": 2, "a": -1e400}', "warning", "stored as -Infinity", True),
    ("boolean", b'{"step": 2, "a": true}', "warning", "is a boolean (true); stored as 1.0",
     True),
    ("event_step_past_int64", b'{"event": "x", "step": 18446744073709551615}', "warning",
     "event 'step' is not an integer", False),
]


@pytest.mark.parametrize(("name", "bad", "severity", "reason", "kept"), CASES,
                         ids=[c[0] for c in CASES])
def test_line_that_breaks_the_parser_is_recorded(tmp_path, caplog, name, bad, severity,
                                                 reason, kept):
    run = tmp_path / "logs" / name
    run.mkdir(parents=True)
    data = GOOD_BEFORE + bad + b"\n" + GOOD_AFTER
    (run / "metrics.jsonl").write_bytes(data)
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        assert [r.getMessage() for r in caplog.records] == []  # nothing raised, nothing retried
        errors = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors')
        assert len(errors) == 1, errors
        assert errors[0][:2] == (len(GOOD_BEFORE), severity) and reason in errors[0][2]
        steps = [r[0] for r in query(mon, "SELECT step FROM metrics ORDER BY step")]
        assert steps == ([1, 2, 3] if kept else [1, 3])
        assert query(mon, 'SELECT "offset" FROM files') == [(len(data),)]
        if name == "surrogate_event":
            assert query(mon, "SELECT kind FROM events") == [("\\udc00",)]


@pytest.mark.parametrize(("value", "stored", "reason"), [
    (b"true", 1.0, "is a boolean (true); stored as 1.0"),
    (b"false", 0.0, "is a boolean (false); stored as 0.0"),
    (b"1e400", float("inf"), "number 1e400 is beyond the range of a double"),
    (b"-1" + b"0" * 400, float("-inf"), "beyond the range of a double; stored as -Infinity"),
])
def test_odd_value_past_the_sample_is_noted_on_the_fast_path_too(tmp_path, value, stored,
                                                                reason):
    """DuckDB's reader would store these silently: such chunks take the careful path."""
    lines = [b'{"step": %d, "loss": 0.5, "flag": 1.0}' % s for s in range(1, 30_001)]
    lines[22_000] = b'{"step": 22001, "loss": 0.5, "flag": ' + value + b"}"
    path = tmp_path / "logs" / "odd" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    with ingest(tmp_path / "logs") as mon:
        errors = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors')
        assert len(errors) == 1 and errors[0][:2] == (sum(len(x) + 1 for x in lines[:22_000]),
                                                      "warning")
        assert reason in errors[0][2]
        assert query(mon, "SELECT count(*) FROM metrics") == [(30_000,)]
        assert query(mon, "SELECT flag FROM metrics WHERE step = 22001") == [(stored,)]


KEYS = ["loss", "Loss", "\\ud800", "\\udfff\\ud800", "a\\u0000b", "", "step", "STEP", "run",
        "buckets", "Buckets", "event", "extra_metrics", "\\u00c9nergie", "\\u00e9nergie",
        "x" * 300, "tab\\t", "\\u212a", "rowid", "time"]
VALUES = [b"1", b"-0.5", b"true", b"false", b"null", b"1e400", b"-1e999", b"1e-400", b"NaN",
          b"Infinity", b"-Infinity", b'"text"', b'"\\ud800"', b"[1, 2]", b"[1.5]", b"{}",
          b'{"a": {"b": [null]}}', b"1" * 400, b"18446744073709551616", b"[" * 70 + b"]" * 70,
          b"[" * 1100 + b"]" * 1100, b"2147483648", b"[2147483648]", b"-9223372036854775809"]


def _nasty_line(rng: random.Random, step: int) -> bytes:
    pairs = [(b'"%s"' % k.encode(), rng.choice(VALUES))
             for k in rng.sample(KEYS, rng.randint(0, 5))]
    if rng.random() < 0.8:
        pairs.insert(rng.randint(0, len(pairs)), (b'"step"', b"%d" % step))
    if rng.random() < 0.15:
        pairs.append((b'"event"', rng.choice([b'"x"', b'"run_end"', b"7", b'"\\udc00"'])))
    line = b"{" + b", ".join(k + b": " + v for k, v in pairs) + b"}"
    if rng.random() < 0.15:  # a damaged line: cut, or stray bytes
        cut = rng.randint(0, len(line))
        line = line[:cut] + rng.choice([b"", b"\xff\xfe", b"\x00", b"}", b'"', b"\\"])
    return line


def test_no_bytes_make_parse_lines_raise_and_all_good_lines_arrive(tmp_path, caplog):
    """Property: for any mix of odd lines, parsing never raises, everything it passes on is
    storable (no line needs the database's refusal backstop), and every good line arrives."""
    rng = random.Random(7)
    lines, good = [], 0
    for step in range(1, 601):
        if step % 3 == 0:
            lines.append(b'{"step": %d, "good": 1.0}' % step)
            good += 1
        else:
            lines.append(_nasty_line(rng, step))
    data = b"\n".join(lines) + b"\n"
    for start in range(0, len(lines), 37):  # any cut into batches
        parse_lines(b"\n".join(lines[start:start + 37]) + b"\n", 0)
    run = tmp_path / "logs" / "fuzz"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(data)
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        assert [r.getMessage() for r in caplog.records] == []
        assert query(mon, "SELECT count(good) FROM metrics_all") == [(good,)]
        assert query(mon, 'SELECT "offset" FROM files') == [(len(data),)]
        refused = query(mon, "SELECT reason FROM ingest_errors WHERE reason LIKE "
                        "'could not %'")
        assert refused == []


class _FailingRollback:
    """A real DuckDB cursor whose rollback fails, as DuckDB's did after an out-of-memory
    error (issue 7): the transaction stays open and aborted."""

    def __init__(self, cursor):
        self._cursor = cursor

    def __getattr__(self, name):
        return getattr(self._cursor, name)

    def rollback(self):
        raise duckdb.TransactionException("rollback failed")


def test_failed_rollback_leaves_no_aborted_cursor_and_the_first_error_is_raised(tmp_path):
    db = Database(tmp_path / "db.duckdb")
    store = Store(db)
    state = store.add_file("r", "r/metrics.jsonl", "metrics")
    line = b'{"step": 1, "loss": 1.0}\n'
    broken = copy.copy(state)
    broken.lines = -1  # UBIGINT: the database refuses the batch inside its transaction
    db._local.cursor = _FailingRollback(db.cursor())
    with pytest.raises(duckdb.Error) as raised:
        store.commit(state, Batch(parse_lines(line, 0), broken))
    assert not isinstance(raised.value, duckdb.TransactionException), raised.value
    assert not isinstance(db.cursor(), _FailingRollback)
    good = copy.copy(state)
    good.offset, good.lines = len(line), 1
    assert store.commit(state, Batch(parse_lines(line, 0), good)) == 1
    assert store.commit(state, Batch(Parsed(), good)) == 0
    assert db.cursor().execute("SELECT step, loss FROM metrics").fetchall() == [(1, 1.0)]
    db.close()


def test_event_text_is_json_duckdb_accepts():
    parsed = parse_lines(b'{"event": "x", "v": NaN, "w": 1e400, "k": "\\ud800"}\n', 0)
    (_, obj), = parsed.events
    con = duckdb.connect()
    assert con.execute("SELECT $t::JSON ->> 'k'", {"t": event_text(obj)}).fetchall() == [
        ("\\ud800",)]
    assert json.loads(event_text(obj))["w"] == float("inf")


def test_whole_log_scan_sees_a_boolean_however_the_blocks_fall():
    """The scan of a log read whole goes block by block; a value cut in two is still seen."""
    data = b'{"step": 1, "a": 1.0}\n{"step": 2, "flag": true}\n{"step": 3, "a": 2.5}\n'
    for cut in range(1, len(data)):
        scan = bulk.Scan(steps=False)
        scan.add_block(data[:cut])
        scan.add_block(data[cut:])
        assert not scan.clean, cut
    clean = bulk.Scan(steps=False)
    clean.add_block(data.replace(b"true", b"1"))
    assert clean.clean and clean.lines == 3


def test_overflow_in_a_key_spelled_like_an_existing_column_is_noted(tmp_path):
    """The check after a fast insert looks at the table's column (loss) for the chunk's key
    (LOSS): DuckDB matched them, so must the check."""
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"step": 1, "loss": 0.5, "lr": 0.1}\n')
    with ingest(tmp_path / "logs") as mon:
        lines = [b'{"step": %d, "LOSS": 0.5, "lr": 0.1}' % s for s in range(2, 12_002)]
        lines[5000] = b'{"step": 5002, "LOSS": 1e400, "lr": 0.1}'
        with path.open("ab") as handle:
            handle.write(b"\n".join(lines) + b"\n")
        mon.tailer.tick()
        assert query(mon, "SELECT loss FROM metrics WHERE step = 5002") == [(float("inf"),)]
        (reason,), = query(mon, "SELECT reason FROM ingest_errors")
        assert "1e400 is beyond the range of a double" in reason
        assert query(mon, "SELECT count(*), count(loss) FROM metrics") == [(12_001, 12_001)]
