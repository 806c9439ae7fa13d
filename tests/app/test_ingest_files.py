"""Odd files in the log directory: names that are not UTF-8, FIFOs, devices, links out of the
log directory, link loops, lines that never end. Each is read or reported once, nothing hangs,
nothing outside the log directory is read, and the other runs keep arriving."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from app.ingest.parse import MAX_LINE
from tests.app.test_ingest_bad_input import GOOD_AFTER, GOOD_BEFORE, ingest, query
from tests.conftest import ROOT

SECRET = "s3cret-do-not-copy"


def once(logs: Path, timeout: float = 60, memory: int | None = None
         ) -> subprocess.CompletedProcess:
    """`ingest --once` as a real process (optionally with its address space capped)."""
    def cap():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-m", "app", "ingest", "--logdir", str(logs),
                           "--once"], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=cap)


def run_folder(logs: Path, name: str | bytes, lines: bytes = GOOD_BEFORE) -> Path:
    folder = Path(os.fsdecode(os.path.join(os.fsencode(logs), os.fsencode(name))))
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_bytes(lines)
    return folder


def test_folder_name_not_utf8_is_read_and_the_scan_goes_on(tmp_path):
    logs = tmp_path / "logs"
    run_folder(logs, "a-first")
    run_folder(logs, b"caf\xe9", GOOD_BEFORE + GOOD_AFTER)
    run_folder(logs, "z-later")
    done = once(logs)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    with ingest(logs) as mon:
        assert query(mon, "SELECT run, count(*) FROM metrics GROUP BY run ORDER BY run") == [
            ("a-first", 1), ("caf\\xe9", 2), ("z-later", 1)]
        with (logs / os.fsdecode(b"caf\xe9") / "metrics.jsonl").open("ab") as handle:
            handle.write(b'{"step": 4, "loss": 0.25}\n')
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT max(step) FROM metrics WHERE run = 'caf\\xe9'") == [(4,)]


def test_fifo_run_json_does_not_hang_and_is_reported_once(tmp_path):
    logs = tmp_path / "logs"
    fifo = run_folder(logs, "piped") / "run.json"
    os.mkfifo(fifo)
    os.mkfifo(run_folder(logs, "piped-metrics") / "rank0.jsonl")
    run_folder(logs, "plain")
    done = once(logs, timeout=20)  # today's code blocks in open() for ever
    assert done.returncode == 0, done.stderr
    with ingest(logs) as mon:
        mon.tailer.tick(discover=True)
        errors = query(mon, "SELECT file, severity, reason, excerpt FROM ingest_errors "
                       "ORDER BY file")
        assert [(e[0], e[1]) for e in errors] == [("piped-metrics/rank0.jsonl", "warning"),
                                                   ("piped/run.json", "warning")]
        assert all("not a regular file" in e[2] and not e[3] for e in errors)
        assert query(mon, "SELECT run FROM metrics ORDER BY run") == [
            ("piped",), ("piped-metrics",), ("plain",)]


def test_run_json_linked_to_dev_zero_is_not_read(tmp_path):
    logs = tmp_path / "logs"
    os.symlink("/dev/zero", run_folder(logs, "zero") / "run.json")
    run_folder(logs, "plain")
    done = once(logs, timeout=60, memory=6 << 30)  # today: read until MemoryError
    assert done.returncode == 0, done.stderr
    assert "1 new ingest errors" in done.stdout
    assert "zero/run.json links outside the log directory" in done.stdout


def test_oversized_run_json_is_reported_once_not_read(tmp_path):
    logs = tmp_path / "logs"
    folder = run_folder(logs, "big")
    (folder / "run.json").write_text(json.dumps({"pad": "x" * 5000}))
    with ingest(logs, run_json_max_bytes=1000) as mon:
        mon.tailer.tick()
        mon.tailer.tick()
        errors = query(mon, "SELECT file, reason FROM ingest_errors")
        assert len(errors) == 1 and errors[0][0] == "big/run.json"
        assert "over 1000 bytes" in errors[0][1] and "--run-json-max-bytes" in errors[0][1]
        assert query(mon, "SELECT meta FROM runs") == [(None,)]


def test_links_out_of_the_log_directory_are_not_followed(tmp_path):
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "passwd").write_text(f"root:x:0:0:{SECRET}:/root:/bin/bash\n" * 3)
    (outside / "creds.json").write_text(json.dumps({"token": SECRET}))
    (outside / "creds.json").chmod(0o600)
    logs = tmp_path / "logs"
    leak = logs / "leak"
    leak.mkdir(parents=True)
    os.symlink(outside / "passwd", leak / "metrics.jsonl")
    os.symlink(outside / "creds.json", leak / "run.json")
    inner = run_folder(logs, "inner", GOOD_BEFORE + GOOD_AFTER)
    os.symlink("../inner/metrics.jsonl", run_folder(logs, "linked", b"") / "events.jsonl")
    os.symlink(inner / "metrics.jsonl", logs / "linked" / "rank0.jsonl")  # inside: read
    with ingest(logs) as mon:
        mon.tailer.tick(discover=True)
        errors = query(mon, "SELECT file, severity, reason, excerpt FROM ingest_errors "
                       "WHERE run = 'leak' ORDER BY file")
        assert [(e[0], e[1]) for e in errors] == [("leak/metrics.jsonl", "warning"),
                                                   ("leak/run.json", "warning")]
        assert all("links outside the log directory" in e[2] and not e[3] for e in errors)
        stored = query(mon, "SELECT string_agg(coalesce(excerpt, '') || reason, ' ') FROM "
                       "ingest_errors UNION ALL SELECT string_agg(CAST(meta AS VARCHAR), ' ') "
                       "FROM runs")
        assert not any(SECRET in (row[0] or "") for row in stored)
        assert query(mon, "SELECT count(*) FROM ranks_all WHERE run = 'linked'") == [(2,)]


def test_symlink_loop_is_reported_once_and_others_go_on(tmp_path):
    logs = tmp_path / "logs"
    loop = logs / "loop"
    loop.mkdir(parents=True)
    os.symlink("metrics.jsonl", loop / "metrics.jsonl")
    plain = run_folder(logs, "plain")
    with ingest(logs) as mon:
        for _ in range(3):
            mon.tailer.tick(discover=True)
        with (plain / "metrics.jsonl").open("ab") as handle:
            handle.write(GOOD_AFTER)
        mon.tailer.tick()
        errors = query(mon, "SELECT file, severity, reason FROM ingest_errors")
        assert len(errors) == 1
        assert errors[0][:2] == ("loop/metrics.jsonl", "warning")
        assert "symlink loop" in errors[0][2]
        assert mon.tailer.failure is None
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [(1,), (3,)]


def test_endless_line_is_reported_once_and_never_read_twice(tmp_path):
    path = run_folder(tmp_path / "logs", "long") / "metrics.jsonl"
    big = b'{"step": 2, "pad": "' + b"x" * (3 << 20)
    with path.open("ab") as handle:
        handle.write(big)
    with ingest(tmp_path / "logs", partial_line_timeout=0.3) as mon:
        time.sleep(0.4)
        for _ in range(3):
            mon.tailer.tick(discover=True)
        errors = query(mon, 'SELECT "offset", severity, reason FROM ingest_errors')
        assert len(errors) == 1
        assert errors[0][:2] == (len(GOOD_BEFORE), "error")
        assert "no newline" in errors[0][2] and "over the 1 MiB limit" in errors[0][2]
        read = mon.tailer.bytes_read
        mon.tailer.tick()
        assert mon.tailer.bytes_read == read  # nothing new: nothing read
        with path.open("ab") as handle:
            handle.write(b"y" * (1 << 20))
        mon.tailer.tick()
        assert mon.tailer.bytes_read - read == 1 << 20  # only the new bytes are searched
        with path.open("ab") as handle:
            handle.write(b'"}\n' + GOOD_AFTER)
        mon.tailer.tick()
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [(1,), (3,)]
        reasons = [r[0] for r in query(mon, "SELECT reason FROM ingest_errors")]
        assert len(reasons) == 2 and "over the 1 MiB limit" in reasons[1]


def test_a_burst_in_one_run_does_not_hold_up_the_others(tmp_path):
    logs = tmp_path / "logs"
    busy = run_folder(logs, "busy") / "metrics.jsonl"
    quiet = run_folder(logs, "quiet") / "metrics.jsonl"
    with ingest(logs, chunk_bytes=MAX_LINE + 1) as mon:  # one MiB per file per tick
        with busy.open("a") as handle:
            handle.write("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n"
                                 for s in range(2, 150_000)))
        with quiet.open("ab") as handle:
            handle.write(GOOD_AFTER)
        mon.tailer.tick()
        assert query(mon, "SELECT step FROM metrics WHERE run = 'quiet' ORDER BY step") == [
            (1,), (3,)]
        offset = query(mon, "SELECT \"offset\" FROM files WHERE run = 'busy'")[0][0]
        assert offset <= (1 << 20) + len(GOOD_BEFORE) < busy.stat().st_size
        assert mon.tailer.behind
        mon.tailer.catch_up()
        assert not mon.tailer.behind
        assert query(mon, "SELECT count(*) FROM metrics WHERE run = 'busy'") == [(149_999,)]


def test_ingest_once_lists_the_errors_it_recorded(tmp_path):
    logs = tmp_path / "logs"
    run_folder(logs, "r", GOOD_BEFORE + b'{"step": 2, "loss": }\n' + GOOD_AFTER)
    done = once(logs)
    assert done.returncode == 0, done.stderr
    assert "ingested 2 rows from 1 files; 1 new ingest errors" in done.stdout
    assert f"error   r/metrics.jsonl @ {len(GOOD_BEFORE)}: invalid JSON" in done.stdout
    again = once(logs)
    assert "0 new ingest errors" in again.stdout and "@" not in again.stdout


def test_server_starts_and_answers_beside_odd_files(tmp_path, make_server):
    # today a FIFO run.json freezes the server (the port open, nothing answering) and a
    # folder name that is not UTF-8 stops it from starting
    logs = tmp_path / "logs"
    os.mkfifo(run_folder(logs, "piped") / "run.json")
    run_folder(logs, b"caf\xe9")
    os.symlink("rank0.jsonl", run_folder(logs, "loop") / "rank0.jsonl")
    server = make_server(logs)
    rows = server.sql("SELECT run FROM metrics ORDER BY run").json()["rows"]
    assert rows == [["caf\\xe9"], ["loop"], ["piped"]]
    errors = server.sql("SELECT file, reason FROM ingest_errors ORDER BY file").json()["rows"]
    assert [e[0] for e in errors] == ["loop/rank0.jsonl", "piped/run.json"]


def _watch_opens(folder: Path) -> int:
    """An inotify descriptor that reports files opened in ``folder`` (IN_OPEN)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0 and libc.inotify_add_watch(fd, os.fsencode(folder), 0x20) >= 0
    return fd


def _opened(fd: int, name: bytes, timeout: float) -> bool:
    import select
    import struct

    deadline = time.monotonic() + timeout
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        buf, at = os.read(fd, 65536), 0
        while at < len(buf):
            size = struct.unpack_from("iIII", buf, at)[3]
            if buf[at + 16:at + 16 + size].rstrip(b"\0") == name:
                return True
            at += 16 + size
    return False


def test_a_fifo_renamed_over_a_log_after_its_check_blocks_nothing(tmp_path):
    # the reviewer's race: a FIFO renamed over a fresh whole-file log right after the tailer
    # opened and checked it; DuckDB and the scanner, opening the name again, blocked for ever
    logs = tmp_path / "logs"
    run = logs / "x"
    run.mkdir(parents=True)
    lines = "".join(json.dumps({"step": s, "loss": 1.0, "acc": 0.5}) + "\n"
                    for s in range(12_000))  # ~500 KB: read whole
    (run / ".tmp").write_text(lines)
    os.mkfifo(run / ".swap")
    inotify = _watch_opens(run)
    os.rename(run / ".tmp", run / "metrics.jsonl")
    proc = subprocess.Popen([sys.executable, "-m", "app", "ingest", "--logdir", str(logs),
                             "--once"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert _opened(inotify, b"metrics.jsonl", timeout=30)
        os.rename(run / ".swap", run / "metrics.jsonl")  # right after the tailer's own open
        out, _ = proc.communicate(timeout=20)
    finally:
        os.close(inotify)
        if proc.poll() is None:
            with contextlib.suppress(OSError), \
                    open(os.open(run / "metrics.jsonl", os.O_WRONLY | os.O_NONBLOCK), "wb"):
                pass  # a writer that closes at once ends a blocked reader's open
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    with ingest(logs) as mon:  # the file that was checked, read from its descriptor
        assert query(mon, "SELECT count(*), max(step) FROM metrics_all") == [(12_000, 11_999)]
        assert query(mon, "SELECT state FROM files WHERE path = 'x/metrics.jsonl'") \
            == [("not_regular",)]


def test_an_unfinished_line_cut_back_and_rewritten_shorter_is_read(tmp_path):
    # the reviewer's case D2: a partial line, then the writer truncates back to the committed
    # offset and writes a shorter complete line; the newline search resumed past the new end
    logs = tmp_path / "logs"
    path = run_folder(logs, "d", b"".join(json.dumps({"step": s, "loss": 1.0}).encode()
                                          + b"\n" for s in range(100))) / "metrics.jsonl"
    with ingest(logs) as mon:
        committed = path.stat().st_size
        with path.open("ab") as handle:
            handle.write(b'{"step": 100, "loss": 1.0, "partial_junk": "' + b"x" * 200)
        mon.tailer.tick()
        os.truncate(path, committed)
        with path.open("ab") as handle:
            handle.write(b'{"step": 100, "loss": 0.5}\n')
        mon.tailer.tick()
        assert query(mon, "SELECT count(*), max(step) FROM metrics_all") == [(101, 100)]
        assert not mon.tailer.pending


def test_an_escaped_name_and_a_name_with_a_backslash_are_two_runs(tmp_path):
    logs = tmp_path / "logs"
    run_folder(logs, b"caf\xe9", GOOD_BEFORE)
    run_folder(logs, "caf\\xe9", GOOD_BEFORE + GOOD_AFTER)  # typed with a backslash
    with ingest(logs) as mon:
        assert query(mon, "SELECT run, count(*) FROM metrics GROUP BY run ORDER BY run") == [
            ("caf\\\\xe9", 2), ("caf\\xe9", 1)]
        assert query(mon, "SELECT count(*) FROM files") == [(2,)]


def test_a_folder_link_out_of_the_log_directory_is_reported_once(tmp_path):
    outside = tmp_path / "elsewhere" / "run"
    outside.mkdir(parents=True)
    (outside / "metrics.jsonl").write_bytes(GOOD_BEFORE)
    logs = tmp_path / "logs"
    run_folder(logs, "inside")
    os.symlink(outside, logs / "linked")
    with ingest(logs) as mon:
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT run, count(*) FROM metrics_all GROUP BY run") == [
            ("inside", 1)]
        assert query(mon, "SELECT run, file, severity, excerpt FROM ingest_errors") == [
            ("linked", "linked", "warning", None)]
        (reason,), = query(mon, "SELECT reason FROM ingest_errors")
        assert "folder link that leads outside the log directory" in reason
    with ingest(logs) as mon:  # and not again after a restart
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(1,)]


def test_a_full_scratch_space_leaves_nothing_behind_and_the_careful_path_reads(tmp_path):
    """Scratch space is /dev/shm (64 MB in a default Docker container): a copy that fails
    must not leave its half-written file there, and the lines still arrive."""
    from app.ingest import chunk as bulk

    scratch = tmp_path / "scratch"
    scratch.mkdir()

    def full(fd):
        os.write(fd, b"half a chunk")
        raise OSError(28, "No space left on device")

    with contextlib.suppress(OSError):
        bulk._scratch_copy(scratch, full)
    assert list(scratch.iterdir()) == []
    lines = b"".join(json.dumps({"step": s, "loss": 1.0}).encode() + b"\n"
                     for s in range(1, 20_001))
    assert "no scratch space" in bulk.prepare(lines, tmp_path / "gone")  # none at all
    logs = tmp_path / "logs"
    (logs / "r").mkdir(parents=True)
    with ingest(logs) as mon:
        shutil.rmtree(mon.scratch)  # every scratch copy now fails (its marker goes too)
        (logs / "r" / "metrics.jsonl").write_bytes(lines)
        mon.tailer.catch_up()
        assert query(mon, "SELECT count(*) FROM metrics") == [(20_000,)]
        mon.scratch.mkdir()  # Monitor.close removes it
