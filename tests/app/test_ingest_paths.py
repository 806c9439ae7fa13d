"""Big clean chunks go through DuckDB's bulk reader, anything odd through the careful path;
either way the stored rows are the same. Files here are large enough (> 256 KiB) for the bulk
path, and the surprises sit past the 20,480 lines DuckDB samples to detect the schema."""

from __future__ import annotations

import json

import pytest

from app.ingest.chunk import Scan
from tests.app.test_ingest_bad_input import ingest, query

LINES = 30_000
LATE = 25_000  # past DuckDB's sample


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def base(step):
    return {"step": step, "loss": 1.0 / step, "elapsed_s": step * 0.5}


@pytest.mark.parametrize("appended", [False, True], ids=["whole-file", "appended-chunk"])
def test_key_first_seen_after_the_sample_becomes_a_column(tmp_path, appended):
    lines = [dict(base(s), **({"grad_norm": 0.25} if s == LATE else {}))
             for s in range(1, LINES + 1)]
    path = tmp_path / "logs" / "late" / "metrics.jsonl"
    if appended:  # the first 100 lines are read before, so the rest is an offset chunk
        write(path, lines[:100])
        mon = ingest(tmp_path / "logs")
        with path.open("a") as handle:
            handle.write("".join(json.dumps(x) + "\n" for x in lines[100:]))
        mon.tailer.tick()
    else:
        write(path, lines)
        mon = ingest(tmp_path / "logs")
    with mon:
        assert query(mon, "SELECT count(*), count(grad_norm), max(grad_norm) FROM metrics") == [
            (LINES, 1, 0.25)]
        assert query(mon, f"SELECT loss FROM metrics WHERE step = {LINES}") == [(1.0 / LINES,)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_resume_inside_a_big_chunk(tmp_path):
    lines = [base(s) for s in range(1, 20_001)] + [base(s) for s in range(15_001, 30_001)]
    write(tmp_path / "logs" / "r" / "metrics.jsonl", lines)
    with ingest(tmp_path / "logs") as mon:
        assert query(mon, "SELECT attempt, start_step, prev_step, reason FROM attempts "
                     "ORDER BY attempt") == [(1, 1, None, "start"),
                                             (2, 15001, 20000, "step_back+clock_back")]
        assert query(mon, "SELECT count(*), max(attempt) FILTER (WHERE step > 15000) FROM "
                     "metrics") == [(30_000, 2)]
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(35_000,)]


@pytest.mark.parametrize(("bad", "severity", "reason", "kept"), [
    (b'{"step": 22000, "loss": "oops"}', "warning", "not a number", True),
    (b'{"step": 22000, "loss": "0.5"}', "warning", "not a number", True),  # DuckDB would cast
    (b"", "error", "blank line", False),
    (b'{"step": 22000, "event": "checkpoint_start"}', None, None, False),
    (b'{"step": 22000, "loss": 0.5, "flag": true}', "warning",
     "is a boolean (true); stored as 1.0", True),
])
def test_odd_line_after_the_sample(tmp_path, bad, severity, reason, kept):
    head = [json.dumps(base(s)).encode() for s in range(1, 22_000)]
    tail = [json.dumps(base(s)).encode() for s in range(22_001, LINES + 1)]
    path = tmp_path / "logs" / "odd" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join([*head, bad, *tail]) + b"\n")
    with ingest(tmp_path / "logs") as mon:
        errors = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors')
        if severity is None:
            assert errors == []
        else:
            assert len(errors) == 1 and errors[0][1] == severity and reason in errors[0][2]
            assert errors[0][0] == sum(len(x) + 1 for x in head)
        expected = LINES if kept else LINES - 1
        assert query(mon, "SELECT count(*) FROM metrics") == [(expected,)]
        if b"flag" in bad:
            assert query(mon, "SELECT flag FROM metrics WHERE step = 22000") == [(1.0,)]
        if b"event" in bad:
            assert query(mon, "SELECT kind, step FROM events") == [("checkpoint_start", 22000)]


@pytest.mark.parametrize(("value", "number"), [
    (b"0.5", True), (b"-1e-05", True), (b"null", True), (b"NaN", True), (b"[1, 2]", True),
    (b'"0.5"', False), (b"true", False), (b" false", False), (b'{"a": 1}', False),
    (b'["a"]', False), (b"-Infinity", False)])
def test_the_scan_finds_any_value_that_is_no_number(value, number):
    """What the byte scan lets through, DuckDB stores as it is: a value that is no number
    (which DuckDB would cast, or store as 1.0) must send the lines to the careful path."""
    line = b'{"step": 7, "x": ' + value + b', "lr": 0.1}\n'
    whole, chunk = Scan(steps=False), Scan()
    whole.add_block(line)
    chunk.add(line)
    assert (whole.clean, chunk.clean) == (number, number)


def test_a_number_in_quotes_is_noted_even_beside_a_key_holding_a_colon(tmp_path):
    # the old check counted the file's quotes against its colons: the colon of "a:b" paid for
    # the quotes of "0.5", the log passed as clean and DuckDB stored 0.5 without a word
    lines = [b'{"step": %d, "c": 0.25}' % s for s in range(1, 30_001)]
    lines[4] = b'{"step": 5, "a:b": 1, "c": 0.25}'  # inside DuckDB's sample: a column
    lines[22_000] = b'{"step": 22001, "c": "0.5"}'
    path = tmp_path / "logs" / "q" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    with ingest(tmp_path / "logs") as mon:
        (offset, reason), = query(mon, 'SELECT "offset", reason FROM ingest_errors')
        assert offset == sum(len(x) + 1 for x in lines[:22_000]) and "not a number" in reason
        assert query(mon, "SELECT count(*) FROM metrics") == [(30_000,)]
