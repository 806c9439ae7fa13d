"""No key, in any run, can make another run's good lines unstorable (issue 7, section 3): keys
map to columns by one rule (app/ingest/columns.py), both parse paths follow it, and keys past
``max_metric_columns`` go to the map column ``extra_metrics``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app import settings as settings_mod
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import diagnose
from app.ingest.columns import column_name, fold
from app.monitor import Monitor
from tests.app.test_ingest_bad_input import ingest, query


def write(path: Path, lines: list[dict | bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        for line in lines:
            handle.write(line if isinstance(line, bytes) else json.dumps(line).encode())
            handle.write(b"\n")


def columns(mon: Monitor) -> dict[str, str]:
    return dict(query(mon, "SELECT column_name, data_type FROM information_schema.columns "
                      "WHERE table_name = 'metric_rows'"))


@pytest.mark.parametrize(("key", "column"), [
    ("loss", "loss"), ("Loss", "Loss"), ("buckets", "buckets"), ("Buckets", "log_Buckets"),
    ("STEP", "log_STEP"), ("Time", "log_Time"), ("run", "log_run"), ("Rank", "log_Rank"),
    ("extra_metrics", "log_extra_metrics"), ("", "log_"), ("a\x00b", "a\\u0000b"),
    ("\ud800", "\\ud800"), ("Énergie", "Énergie"), ("tab\there", "tab\\u0009here"),
])
def test_the_rule(key, column):
    assert column_name(key) == column


def test_fold_is_duckdbs(tmp_path):
    """DuckDB 2.0 takes names equal under ASCII case for one column, and nothing more: the
    rule's fold must agree, or a key is given no column of its own."""
    write(tmp_path / "logs" / "r" / "metrics.jsonl",
          [{"step": 1, "Énergie": 1.0, "\u212a": 2.0, "LOSS": 3.0}])  # U+212A: Kelvin sign
    with ingest(tmp_path / "logs") as mon:
        cur = mon.db.cursor()
        for name, same_column in [("ÉNERGIE", True), ("énergie", False), ("loss", True),
                                  ("k", False), ("K", False)]:
            try:
                cur.execute(f'SELECT "{name}" FROM metric_rows').fetchall()
                found = True
            except Exception:
                found = False
            assert found == same_column == (fold(name) in map(fold, ["Énergie", "LOSS"]))


def test_unicode_case_is_two_columns_and_both_runs_arrive(tmp_path):
    """Run a logs Énergie, run b logs énergie: Python's lower() took them for one column."""
    logs = tmp_path / "logs"
    write(logs / "a" / "metrics.jsonl", [{"step": s, "Énergie": 1.0} for s in (1, 2)])
    write(logs / "b" / "metrics.jsonl", [{"step": s, "énergie": 2.0} for s in (1, 2, 3)])
    with ingest(logs) as mon:
        assert query(mon, 'SELECT run, count(*), count("Énergie"), count("énergie") FROM '
                     "metrics GROUP BY run ORDER BY run") == [("a", 2, 2, 0), ("b", 3, 0, 3)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_other_spelling_of_buckets_cannot_take_its_column(tmp_path):
    """"Buckets": 2.0 made a DOUBLE column shared with buckets: every later buckets list was
    dropped, in every run, and diagnose crashed."""
    logs = tmp_path / "logs"
    write(logs / "a" / "metrics.jsonl", [{"step": 1, "loss": 1.0, "Buckets": 2.0}])
    with ingest(logs) as mon:
        lines = [{"step": s, "loss": 1.0 + (s == 30) * 9, "buckets": [s % 3, 1]}
                 for s in range(1, 41)]
        write(logs / "b" / "metrics.jsonl", lines)
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT run, count(*), count(buckets), count(log_Buckets) FROM "
                     "metrics GROUP BY run ORDER BY run") == [("a", 1, 0, 1), ("b", 40, 40, 0)]
        assert columns(mon)["buckets"] == "INTEGER[]"
        assert query(mon, "SELECT buckets FROM metrics WHERE run = 'b' AND step = 2") == [
            ([2, 1],)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]
        assert any(i.run == "b" for i in diagnose(mon.db.cursor(), Watch()))


@pytest.mark.parametrize("key", ["STEP", "Time", "Epoch", "ELAPSED_S", "Run", "Attempt",
                                 "File_ID", "Line_Id", "Rank", "Extra_Metrics", ""])
def test_any_other_spelling_of_a_special_or_reserved_name_is_a_metric(tmp_path, key):
    logs = tmp_path / "logs"
    write(logs / "odd" / "metrics.jsonl", [{"step": 1, key: 5.0, "time": 100.0}])
    write(logs / "plain" / "metrics.jsonl", [{"step": 1, "loss": 1.0, "epoch": 0.5,
                                             "elapsed_s": 1.0, "buckets": [1]}])
    with ingest(logs) as mon:
        name = column_name(key)
        assert query(mon, f'SELECT run, step, "{name}", "time" FROM metrics ORDER BY run') == [
            ("odd", 1, 5.0, 100.0), ("plain", 1, None, None)]
        assert query(mon, "SELECT epoch, elapsed_s, buckets FROM metrics WHERE run = 'plain'"
                     ) == [(0.5, 1.0, [1])]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_control_characters_in_a_key_keep_the_line(tmp_path):
    """A NUL in a key dropped the whole line (pyarrow cuts the name at the NUL)."""
    path = tmp_path / "logs" / "nul" / "metrics.jsonl"
    write(path, [b'{"step": 1, "loss": 1.0}', b'{"step": 2, "loss": 0.9, "a\\u0000b": 7}',
                 b'{"step": 3, "loss": 0.8, "line\\nbreak": 1}'])
    with ingest(tmp_path / "logs") as mon:
        assert query(mon, 'SELECT step, loss, "a\\u0000b", "line\\u000abreak" FROM metrics '
                     "ORDER BY step") == [(1, 1.0, None, None), (2, 0.9, 7.0, None),
                                          (3, 0.8, None, 1.0)]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_two_keys_of_one_column_on_a_line(tmp_path):
    path = tmp_path / "logs" / "dup" / "metrics.jsonl"
    write(path, [{"step": 1, "Loss": 1.0, "loss": 2.0, "Buckets": 3.0, "log_buckets": 4.0}])
    with ingest(tmp_path / "logs") as mon:
        assert query(mon, "SELECT loss, log_buckets FROM metrics") == [(1.0, 3.0)]
        (reason,), = query(mon, "SELECT reason FROM ingest_errors")
        assert "'loss' goes to the same column ('Loss') as the key 'Loss' before it" in reason
        assert "'log_buckets' goes to the same column ('log_Buckets') as the key 'Buckets'" \
            in reason


ODD_KEYS = [{"Acc": 0.5}, {"acc": 0.25}, {"Buckets": 1.0}, {"Time": 3.0}, {"run": 4.0},
            {"Énergie": 1.0}, {"énergie": 2.0}, {"STEP": 2.0}]
ODD_VALUES = [{"flag": True}, {"big": 1e300}]
PIECE = 6000  # lines: about 330 KiB, past the fast path's 256 KiB


def _lines() -> list[bytes]:
    """Five pieces of seed-like lines; the 2nd carries an odd key or value every 500 lines,
    the 4th only odd keys (its bytes look clean: only the key rule sends it back)."""
    lines = []
    for step in range(1, 5 * PIECE + 1):
        line = {"step": step, "loss": 1.0 / step, "elapsed_s": step * 0.5}
        odd = {1: ODD_KEYS + ODD_VALUES, 3: ODD_KEYS}.get((step - 1) // PIECE)
        if odd and step % 500 == 0:
            line |= odd[(step // 500) % len(odd)]
        lines.append(json.dumps(line).encode())
    return [*lines, b'{"step": %d, "x\\u0000y": 1, "c": 1e400}' % (5 * PIECE + 1)]


def _stored(mon: Monitor) -> tuple[list, list, list]:
    names = sorted(c for c in columns(mon) if c != "file_id")
    select = ", ".join(f'"{n}"' for n in names)
    rows = query(mon, f"SELECT {select} FROM metrics ORDER BY step")
    errors = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors ORDER BY 1')
    return names, rows, errors


def _ingest_in_pieces(logdir: Path, lines: list[bytes], size: int):
    path = logdir / "r" / "metrics.jsonl"
    write(path, lines[:size])
    with ingest(logdir) as mon:
        for start in range(size, len(lines), size):
            write(path, lines[start:start + size])
            mon.tailer.tick()
        return _stored(mon)


def test_both_paths_store_the_same_tables(tmp_path):
    """The same bytes in big pieces (the fast path stores the clean ones and hands back what
    it cannot store as the careful path would) and in small ones (the careful path only)
    give the same columns, rows and recorded problems."""
    lines = _lines()
    fast = _ingest_in_pieces(tmp_path / "big", lines, PIECE)
    careful = _ingest_in_pieces(tmp_path / "small", lines, 1000)
    assert fast[0] == careful[0]
    assert fast[1] == careful[1]
    assert fast[2] == careful[2]
    names, rows, errors = fast
    assert len(rows) == 5 * PIECE + 1 and "acc_1" not in names and "Acc" in names
    assert {"log_Buckets", "log_Time", "log_run", "log_STEP", "Énergie", "énergie",
            "x\\u0000y"} <= set(names)
    assert {e[1] for e in errors} == {"warning"}
    assert {e[2].split()[-1] for e in errors} == {"1.0", "Infinity"}  # flag: true; 1e400


def test_fast_path_stores_clean_keys_as_they_are(tmp_path):
    """A clean big log still goes through the fast path and keeps its names."""
    lines = [{"step": s, "loss": 1.0 / s, "Grad_Norm": 0.5} for s in range(1, 20_001)]
    write(tmp_path / "logs" / "r" / "metrics.jsonl", lines)
    with ingest(tmp_path / "logs") as mon:
        assert "Grad_Norm" in columns(mon)
        assert query(mon, "SELECT count(*), sum(grad_norm) FROM metrics") == [(20_000, 10_000.0)]


def _capped(logdir: Path, cap: int) -> Monitor:
    settings = dataclasses.replace(settings_mod.resolve(), max_metric_columns=cap)
    mon = Monitor.open(logdir, settings)
    mon.tailer.store.max_columns = cap  # until the tailer passes the setting to its Store
    return mon


def _wide(step: int, keys: range) -> dict:
    return {"step": step} | {f"m{k:04d}": step + k / 1000 for k in keys}


@pytest.mark.parametrize("lines", [20, 3000], ids=["careful", "fast-path-refused"])
def test_keys_past_the_cap_go_to_the_overflow_map_reported_once(tmp_path, lines):
    logs = tmp_path / "logs"
    write(logs / "a" / "metrics.jsonl", [_wide(s, range(80)) for s in range(1, lines + 1)])
    with _capped(logs, 50) as mon:
        mon.tailer.tick(discover=True)
        metric = [c for c in columns(mon) if c.startswith("m0")]
        assert len(metric) == 50 and columns(mon)["extra_metrics"] == "MAP(VARCHAR, DOUBLE)"
        total = lines * (lines + 1) / 2
        assert query(mon, "SELECT count(*), sum(m0000), sum(extra_metrics['m0079']), "
                     "max(cardinality(extra_metrics)) FROM metrics") == [
            (lines, total, pytest.approx(total + lines * 0.079), 30)]
        # more lines with the same keys, and a second run: nothing new is reported
        write(logs / "a" / "metrics.jsonl", [_wide(s, range(80)) for s in (lines + 1, )])
        write(logs / "b" / "metrics.jsonl", [_wide(1, range(3)) | {"late": 1.0}])
        mon.tailer.tick(discover=True)
        warnings = query(mon, 'SELECT run, "offset", reason FROM ingest_errors ORDER BY run')
        assert [w[:2] for w in warnings] == [("a", 0), ("b", 0)]
        assert "max_metric_columns=50" in warnings[0][2] and "30 key(s)" in warnings[0][2]
        assert "m0050, m0051" in warnings[0][2] and "--max-metric-columns" in warnings[0][2]
        assert "1 key(s)" in warnings[1][2] and "late" in warnings[1][2]
        assert query(mon, "SELECT m0002, extra_metrics FROM metrics WHERE run = 'b'") == [
            (1.002, {"late": 1.0})]
