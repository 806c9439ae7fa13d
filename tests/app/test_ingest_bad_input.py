"""Each bad input from the backbone issue is recorded in ingest_errors with file and byte
offset, and every good line around it arrives."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from app import settings as settings_mod
from app.monitor import Monitor

GOOD_BEFORE = b'{"step": 1, "loss": 1.0}\n'
GOOD_AFTER = b'{"step": 3, "loss": 0.5}\n'

# (name, bad bytes between two good lines, severity, words in the reason, is the line kept)
CASES = [
    ("invalid_json", b'{"step": 2, "loss": }\n', "error", "invalid JSON", False),
    ("not_object", b"[1, 2, 3]\n", "error", "not a JSON object", False),
    ("missing_step", b'{"loss": 0.7}\n', "error", "missing 'step'", False),
    ("float_step", b'{"step": 2.5, "loss": 0.7}\n', "error", "not an integer", False),
    ("string_step", b'{"step": "2", "loss": 0.7}\n', "error", "not an integer", False),
    ("string_metric", b'{"step": 2, "loss": "abc"}\n', "warning", "not a number", True),
    ("huge_line", b'{"step": 2, "pad": "' + b"x" * (1024 * 1024 + 10) + b'"}\n', "error",
     "over the 1 MiB limit", False),
    ("binary", b"\x00\xff\xfe\x89PNG\x1a\n", "error", "not UTF-8", False),
    ("blank", b"   \n", "error", "blank line", False),
    ("merged_truncated", b'{"step": 2, "lo{"step": 2, "loss": 0.6}\n', "error", "invalid JSON",
     False),
]


def ingest(logdir: Path, **overrides) -> Monitor:
    settings = dataclasses.replace(settings_mod.resolve(), **overrides)
    monitor = Monitor.open(logdir, settings)
    monitor.tailer.tick(discover=True)
    return monitor


def query(monitor: Monitor, sql: str) -> list[tuple]:
    return monitor.db.cursor().execute(sql).fetchall()


@pytest.mark.parametrize(("name", "bad", "severity", "reason", "kept"), CASES,
                         ids=[c[0] for c in CASES])
def test_bad_line_recorded_and_neighbours_arrive(tmp_path, name, bad, severity, reason, kept):
    run = tmp_path / "logs" / name
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(GOOD_BEFORE + bad + GOOD_AFTER)
    with ingest(tmp_path / "logs") as mon:
        errors = query(mon, "SELECT run, file, \"offset\", severity, reason FROM ingest_errors")
        assert len(errors) == 1, errors
        run_id, file, offset, sev, why = errors[0]
        assert (run_id, file, offset, sev) == (name, f"{name}/metrics.jsonl", len(GOOD_BEFORE),
                                               severity)
        assert reason in why
        steps = [r[0] for r in query(mon, "SELECT step FROM metrics_all ORDER BY step")]
        assert steps == ([1, 2, 3] if kept else [1, 3])


def test_bom_and_crlf_are_read_and_noted(tmp_path):
    run = tmp_path / "logs" / "win"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(b'\xef\xbb\xbf{"step": 1, "loss": 1.0}\r\n'
                                        b'{"step": 2, "loss": 0.9}\r\n{"step": 3, "loss": 0.8}\r\n')
    with ingest(tmp_path / "logs") as mon:
        reasons = [r[0] for r in query(mon, "SELECT reason FROM ingest_errors ORDER BY reason")]
        assert len(reasons) == 2
        assert "byte order mark" in reasons[0] and "CRLF" in reasons[1]
        assert query(mon, "SELECT step, loss FROM metrics ORDER BY step") == [
            (1, 1.0), (2, 0.9), (3, 0.8)]


def test_unfinished_line_reported_after_timeout_then_read_when_completed(tmp_path):
    run = tmp_path / "logs" / "crash"
    run.mkdir(parents=True)
    path = run / "metrics.jsonl"
    path.write_bytes(GOOD_BEFORE + b'{"step": 2, "lo')
    with ingest(tmp_path / "logs", partial_line_timeout=0.3) as mon:
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]
        time.sleep(0.4)
        mon.tailer.tick()
        mon.tailer.tick()  # reported once, not on every tick
        rows = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors')
        assert len(rows) == 1
        assert rows[0][:2] == (len(GOOD_BEFORE), "error") and "no newline" in rows[0][2]
        with path.open("ab") as handle:
            handle.write(b'ss": 0.7}\n' + GOOD_AFTER)
        mon.tailer.tick()
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [(1,), (2,), (3,)]


def test_file_deleted_while_being_read(tmp_path):
    logs = tmp_path / "logs"
    (logs / "gone").mkdir(parents=True)
    (logs / "stays").mkdir()
    (logs / "gone" / "metrics.jsonl").write_bytes(GOOD_BEFORE)
    (logs / "stays" / "metrics.jsonl").write_bytes(GOOD_BEFORE)
    with ingest(logs) as mon:
        with (logs / "gone" / "metrics.jsonl").open("ab") as handle:
            handle.write(GOOD_AFTER)
        os.unlink(logs / "gone" / "metrics.jsonl")
        with (logs / "stays" / "metrics.jsonl").open("ab") as handle:
            handle.write(GOOD_AFTER)
        mon.tailer.tick(discover=True)
        errors = query(mon, "SELECT file, severity, reason FROM ingest_errors")
        assert errors == [("gone/metrics.jsonl", "warning",
                           f"file deleted; {len(GOOD_BEFORE)} of {len(GOOD_BEFORE)} bytes had "
                           "been read")]
        assert query(mon, "SELECT run, step FROM metrics ORDER BY run, step") == [
            ("gone", 1), ("stays", 1), ("stays", 3)]


def _as_nobody(cmd: list[str]) -> list[str]:
    """Root reads any file, so the permission case runs the ingest as an unprivileged user."""
    if os.geteuid() != 0:
        return cmd
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot drop privileges")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]


@pytest.fixture
def open_tmp():
    """A folder an unprivileged user can enter (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="cliffwatch-perm-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_unreadable_file(open_tmp):
    tmp_path = open_tmp
    logs = tmp_path / "logs"
    (logs / "locked").mkdir(parents=True)
    (logs / "open").mkdir()
    (logs / "locked" / "metrics.jsonl").write_bytes(GOOD_BEFORE)
    (logs / "open" / "metrics.jsonl").write_bytes(GOOD_BEFORE + GOOD_AFTER)
    (logs / "locked" / "metrics.jsonl").chmod(0o000)
    for folder in (tmp_path, logs, logs / "locked", logs / "open"):
        folder.chmod(0o777)
    os.chmod(logs / "open" / "metrics.jsonl", 0o644)
    root = Path(__file__).resolve().parents[2]
    cmd = _as_nobody([sys.executable, "-m", "app", "ingest", "--logdir", str(logs), "--once"])
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "1 new ingest errors" in done.stdout
    (logs / "locked" / "metrics.jsonl").chmod(0o644)
    with ingest(logs) as mon:
        errors = query(mon, "SELECT file, severity, reason FROM ingest_errors")
        assert errors[0][:2] == ("locked/metrics.jsonl", "error")
        assert "permission denied" in errors[0][2]
        # once readable again, it is read like any other file
        assert query(mon, "SELECT run, step FROM metrics ORDER BY run, step") == [
            ("locked", 1), ("open", 1), ("open", 3)]


def test_nonfinite_and_null_values(tmp_path):
    run = tmp_path / "logs" / "nan"
    run.mkdir(parents=True)
    lines = [{"step": 1, "loss": float("nan"), "gn": float("inf")},
             {"step": 2, "loss": None, "gn": float("-inf")}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with ingest(tmp_path / "logs") as mon:
        rows = query(mon, "SELECT step, isnan(loss), loss IS NULL, gn FROM metrics ORDER BY step")
        assert rows == [(1, True, False, float("inf")), (2, None, True, float("-inf"))]
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(0,)]


@pytest.mark.parametrize("bad", [
    b'{"step": 99999999999999999999, "loss": 0.5}',
    b'{"step": 2, "loss": 0.5, "buckets": [99999999999]}',
    b'{"step": 2, "": 0.5}',
    b'{"step": 2, "loss": 0.5, "Loss": 0.7}',
    b'{"step": 2, "rowid": 0.5}',
], ids=["huge-step", "huge-bucket", "empty-key", "case-twin", "rowid-key"])
def test_values_the_database_would_refuse_never_stop_the_file(tmp_path, bad):
    run = tmp_path / "logs" / "odd"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(GOOD_BEFORE + bad + b"\n" + GOOD_AFTER)
    with ingest(tmp_path / "logs") as mon:
        steps = [r[0] for r in query(mon, "SELECT step FROM metrics ORDER BY step")]
        assert steps[0] == 1 and steps[-1] == 3
        assert query(mon, "SELECT \"offset\" FROM files WHERE kind = 'metrics'") == [
            (len(GOOD_BEFORE) + len(bad) + 1 + len(GOOD_AFTER),)]


def test_line_the_database_refuses_is_recorded_and_skipped(tmp_path):
    """Only a refusal for the line's own content (here a value past a column's type, in a
    database an older version made) skips a line; its neighbours arrive."""
    run = tmp_path / "logs" / "narrow"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(b'{"step": 1, "tiny": 1}\n')
    with ingest(tmp_path / "logs") as mon:
        mon.db.cursor().execute("ALTER TABLE metric_rows ALTER COLUMN tiny TYPE TINYINT")
        with open(run / "metrics.jsonl", "ab") as handle:
            handle.write(b'{"step": 2, "tiny": 1000}\n{"step": 3, "tiny": 2}\n')
        mon.tailer.tick()
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [(1,), (3,)]
        errors = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors')
        assert len(errors) == 1
        offset, severity, reason = errors[0]
        assert (offset, severity) == (23, "error")
        assert "could not store this line (ConversionException" in reason
