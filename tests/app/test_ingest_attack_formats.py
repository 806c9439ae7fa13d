"""One bad record never stops a file, in any format (issue 18, finding 2). Per format, seeded
hostile records among good ones go through the real tailer into a real DuckDB file: nothing
raises or is retried, every good record is stored, every bad one is an ingest_errors row at
its offset, and no file is left failing. The JSONL careful path has its own fuzz
(test_ingest_parse_errors.py); these cover the other readers, whose records went through
code that raised (orjson refused an integer past 64 bits; the stdlib recursed 5,000 deep)."""

from __future__ import annotations

import json
import logging
import os
import random
import struct
import time
from pathlib import Path

import pytest

from app.ingest.activity import Changes
from app.ingest.formats import tfevents, tfrecord
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import run_cli

DEEP = "[" * 5000 + "]" * 5000  # past orjson's depth limit and Python's recursion limit
FAIRLY_DEEP = "[" * 900 + "]" * 900  # read by both decoders, too deep to store as JSON text
HUGE = "9" * 23  # the step of the issue: past 64 bits
DIGITS = "1" + "0" * 5000  # past Python's int() limit of 4,300 digits


def healthy(mon, caplog) -> None:
    """Nothing raised below the tailer: no retry, no failure, every file read."""
    assert [r.getMessage() for r in caplog.records if "failing" in r.getMessage()] == []
    assert mon.tailer.failure is None
    assert query(mon, "SELECT path, state FROM files WHERE state <> 'ok'") == []
    # the backstop that turns an exception into an error row: reached by nothing foreseen
    assert query(mon, "SELECT reason FROM ingest_errors WHERE reason LIKE '%could not %'") == []


def errors_at(mon, severity: str = "error") -> set[int]:
    """Offsets of the ingest_errors rows of a severity ("%": any)."""
    return {o for (o,) in mon.db.cursor().execute(
        'SELECT "offset" FROM ingest_errors WHERE severity LIKE $s', {"s": severity}
    ).fetchall()}


def offsets(lines: list[bytes]) -> list[int]:
    out, pos = [], 0
    for line in lines:
        out.append(pos)
        pos += len(line) + 1
    return out


def read_fuzzed(tmp_path: Path, caplog, path: str, lines: list[bytes], count_sql: str,
                good: int, bad: list[int], severity: str = "error") -> None:
    """Write ``lines`` as LOGDIR/``path``, read it through the real tailer: nothing raised,
    ``good`` rows counted by ``count_sql``, each bad line an error row at its offset, every
    byte read."""
    data = b"\n".join(lines) + b"\n"
    log = tmp_path / "logs" / path
    log.parent.mkdir(parents=True)
    log.write_bytes(data)
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        healthy(mon, caplog)
        assert query(mon, count_sql) == [(good,)]
        assert {offsets(lines)[i] for i in bad} <= errors_at(mon, severity)
        assert query(mon, 'SELECT "offset" FROM files') == [(len(data),)]


# ---- the issue's records, through the CLI ------------------------------------------------

ISSUE = [  # (file, good record, bad record, good record, separator, head, tail, the reason)
    ("main.log", b"s:1 trl:2.0", f"s:{HUGE} trl:1".encode(), b"s:3 trl:1.0", b"\n", b"",
     b"\n", "not a step within 64 bits"),
    ("trainer_state.json", b'{"step": 1, "loss": 2.0}', f'{{"step": {HUGE}, "loss": 1}}'.encode(),
     b'{"step": 3, "loss": 1.0}', b", ", b'{"log_history": [', b"]}", "not an integer within"),
    ("trainer_state.json", b'{"step": 1, "loss": 2.0}', f'{{"step": 2, "a": {DEEP}}}'.encode(),
     b'{"step": 3, "loss": 1.0}', b", ", b'{"log_history": [', b"]}", "nested too deeply"),
]


def test_the_issues_records_are_errors_and_the_rest_is_stored(tmp_path):
    """``ingest --once`` raised on each of these and stored nothing of its file (under serve:
    retried for ever, health "failing"); one run folder per case, one command."""
    logs = tmp_path / "logs"
    expected = []
    for i, (name, before, bad, after, sep, head, tail, reason) in enumerate(ISSUE):
        path = logs / f"case{i}" / name
        path.parent.mkdir(parents=True)
        path.write_bytes(head + sep.join([before, bad, after]) + tail)
        expected.append(f"error   case{i}/{name} @ {len(head) + len(before) + len(sep)}: ")
        expected.append(reason)
    (logs / "meta").mkdir()
    (logs / "meta" / "run.json").write_text(f'{{"config": {DEEP}}}')
    (logs / "meta" / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 1.0}\n')
    expected.append("error   meta/run.json @ 0: run.json is not usable: nested too deeply")
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ingested 7 rows from 5 files; 4 new ingest errors" in done.stdout, done.stdout
    assert [text for text in expected if text not in done.stdout] == [], done.stdout


# ---- llm.c main.log --------------------------------------------------------------------

LLMC_BAD = [f"s:{HUGE} trl:1".encode(), f"s:{DIGITS} trl:1".encode(),
            b"s:99999999999999999999 trl:1 lr:0.1", b"s:18446744073709551616 tel:1.0"]
LLMC_NOISE = [b"s:1 trl:abc", b"s:2 trl:1e999 norm:-inf", b"s:-1 trl:1", b"s:3 x:",
              b"\xff\xfe s:1 trl:1", b"s:4 trl:1 trl:2", b"s:5 tel:nan eval:inf", b"s:6",
              b"s:7 \xff:1 tok/s:" + b"9" * 400, b"", b"\x00" * 30]


def _llmc_line(rng: random.Random, step: int) -> tuple[bytes, bool]:
    """A noisy line, and whether it must be an error."""
    choice = rng.random()
    if choice < 0.3:
        return rng.choice(LLMC_BAD), True
    if choice < 0.8:
        return rng.choice(LLMC_NOISE), False
    return bytes(b for b in rng.randbytes(rng.randint(0, 60)) if b != 10), False


def test_llmc_log_hostile_lines(tmp_path, caplog):
    rng = random.Random(18)
    lines, bad, good = [b"s:0 trl:2.0 good:1"], [], 1
    for step in range(1, 400):
        if step % 3 == 0:
            lines.append(b"s:%d trl:0.5 lr:0.001 norm:1.0 good:1" % step)
            good += 1
        else:
            line, is_bad = _llmc_line(rng, step)
            lines.append(line)
            bad += [len(lines) - 1] if is_bad else []
    read_fuzzed(tmp_path, caplog, "gpt2/main.log", lines, "SELECT count(good) FROM metrics_all",
                good, bad)


# ---- Hugging Face trainer_state.json ------------------------------------------------------

STATE_BAD = [f'{{"step": {HUGE}, "loss": 1}}', f'{{"step": 2, "x": {DEEP}}}', '{"loss": 1}',
             "7", '"text"', "null", "[1, 2]", '{"step": 2.5}', '{"step": "3"}',
             '{"step": 1e400}', f'{{"step": {DIGITS}}}', '{"step": 4, "a": nul}',
             '{"step": 5 "loss": 1}']
STATE_NOISE = [f'{{"step": 5, "epoch": 1{"0" * 400}, "time": 1{"0" * 500}}}',
               '{"step": 6, "loss": NaN, "grad_norm": Infinity}', '{"step": 7, "\\ud800": 1.0}',
               '{"step": 8, "a": {"b": {"c": 1}}}',
               f'{{"step": 9, "event": "x", "d": {FAIRLY_DEEP}}}',
               '{"step": 10, "elapsed_time": "99999999999 days, 1:00:00"}',
               f'{{"step": 11, "loss": {DIGITS}}}', '{"step": 12, "epoch": 1e400}',
               f'{{"step": 13, "train_runtime": 1, "epoch": 1{"0" * 400}}}',
               f'{{"event": "run_end", "step": 14, "elapsed_s": 1{"0" * 400}}}',
               '{"step": 15, "note": "\xff\xfe"}', '{"step": 16, "\xff": 1.0}',
               '{"step": 17, "train_loss": 0.1, "val_loss": 0.2, "epoch": 2.0}', "{}",
               '{"step": 18, "buckets": [1, 99999999999]}', '{"step": 19, "loss": [1]}']
TOP_BEFORE = f'{{\n  "best_metric": {DEEP},\n  "epoch": 1.0,\n  "log_history": ['
TOP_AFTER = '\n  ],\n  "num_train_epochs": 3,\n  "total_flos": {flos},\n  "trial_params": ' \
            f'{DEEP}\n}}\n'


def _state(entries: list[str], flos: int) -> tuple[bytes, list[int]]:
    """The file as bytes (the noise holds bytes that are not UTF-8: latin-1 keeps them), and
    each entry's offset."""
    head = TOP_BEFORE.encode()
    pieces, at, pos = [], [], len(head)
    for i, entry in enumerate(entries):
        raw = ("" if i == 0 else ",") + "\n    " + entry
        encoded = raw.encode("latin-1" if "\xff" in entry else "utf-8")
        at.append(pos + len(encoded) - len(entry.encode("latin-1" if "\xff" in entry
                                                        else "utf-8")))
        pieces.append(encoded)
        pos += len(encoded)
    return head + b"".join(pieces) + TOP_AFTER.replace("{flos}", str(flos)).encode(), at


def _rewrite(path, data: bytes, ns: list[int]) -> None:
    path.write_bytes(data)
    ns[0] += 10**9  # a new modification time even within the clock's resolution
    os.utime(path, ns=(ns[0], ns[0]))


def test_trainer_state_hostile_entries_through_rewrites(tmp_path, caplog):
    """Hostile entries and top-level members; then three saves that each append entries,
    as the Trainer rewrites the file: every good entry once, every bad one an error."""
    rng = random.Random(16)
    entries, bad, good, step = [], [], 0, 100
    path = tmp_path / "logs" / "hf" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    ns = [10**18]
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        for save in range(4):
            for _ in range(60):
                step += 1
                if rng.random() < 0.4:
                    entries.append(json.dumps({"epoch": step / 1000, "good": 1.0,
                                               "loss": 1 / step, "step": step}))
                    good += 1
                elif rng.random() < 0.5:
                    entries.append(rng.choice(STATE_BAD))
                    bad.append(len(entries) - 1)
                else:
                    entries.append(rng.choice(STATE_NOISE))
            data, at = _state(entries, flos=10**save)
            _rewrite(path, data, ns)
            mon.tailer.tick(changes=Changes(files={"hf/trainer_state.json"}))
            mon.tailer.catch_up()
            healthy(mon, caplog)
            assert query(mon, "SELECT count(good), count(DISTINCT step) FILTER (WHERE good "
                         "IS NOT NULL) FROM metrics_all") == [(good, good)]
            assert {at[i] for i in bad} <= errors_at(mon)
        assert query(mon, "SELECT lines FROM files") == [(len(entries),)]
        assert query(mon, "SELECT count(*) FROM attempts WHERE reason = 'file_replaced'") == [
            (0,)]  # no save was taken for a new history


# ---- run.json -----------------------------------------------------------------------------

RUN_JSON = [  # (bytes, stored as the run's meta (else an error row))
    (b'{"steps_per_epoch": ' + HUGE.encode() + b"}", True),
    (b'{"world_size": 99999999999999999999, "a": NaN, "b": -1e400}', True),
    (b'{"\\ud800": 1, "k": "\\udc00"}', True),
    (b'{"a": ' + DEEP.encode() + b"}", False),
    (b'{"a": ' + FAIRLY_DEEP.encode() + b"}", False),
    (b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}", False),
    (b'{"a": ' + DIGITS.encode() + b"}", True),
    (b"\xff\xfe{}", False), (b'{"a": "\xff"}', False), (b'{"a": 1', False), (b"[1]", False),
    (b'"text"', False), (b'{"world_size": true, "steps_per_epoch": -5}', True),
    (b'{"a": {"b": [1, {"c": null}]}}', True),
]


def test_run_json_hostile_contents(tmp_path, caplog):
    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 1.0}\n')
    path = run / "run.json"
    path.write_bytes(b"{}")
    ns = [10**18]
    rng = random.Random(5)
    cases = RUN_JSON * 2
    rng.shuffle(cases)
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        for data, usable in cases:
            before = query(mon, "SELECT count(*) FROM ingest_errors")[0][0]
            _rewrite(path, data, ns)
            mon.tailer.tick(changes=Changes(files={"r/run.json"}))
            healthy(mon, caplog)
            errors = query(mon, "SELECT count(*) FROM ingest_errors")[0][0] - before
            assert errors == (0 if usable else 1), data[:40]
            if usable:
                (meta,) = query(mon, "SELECT meta FROM runs")[0]
                assert meta.startswith("{"), data[:40]
        assert query(mon, "SELECT count(*) FROM metrics") == [(1,)]


# ---- TensorBoard event files --------------------------------------------------------------

def _frame(body: bytes) -> bytes:
    length = struct.pack("<Q", len(body))
    return (length + struct.pack("<I", tfrecord.masked_crc(length)) + body
            + struct.pack("<I", tfrecord.masked_crc(body)))


def _event(step: int, **scalars) -> bytes:
    event = tfevents.Event(step=step, wall_time=1.7e9 + step)
    for tag, value in scalars.items():
        item = event.summary.value.add(tag=tag)
        item.simple_value = value
    return event.SerializeToString()


def _hostile_event(rng: random.Random, step: int) -> tuple[bytes, bool]:
    """A framed hostile record, and whether it must be an error."""
    choice = rng.randrange(7)
    if choice == 0:  # a body that is no Event (checksums fine)
        return _frame(b"\x0a\xff\xff\xff\xff\x0f" + rng.randbytes(20)), True
    if choice == 1:  # a data checksum that fails
        framed = bytearray(_frame(_event(step, loss=1.0)))
        framed[-1] ^= 0xFF
        return bytes(framed), True
    event = tfevents.Event(step=rng.choice([step, -(2**63), 2**63 - 1]),
                           wall_time=rng.choice([float("nan"), float("inf"), -1e308, 1.0]))
    value = event.summary.value.add(tag=rng.choice(["loss", "step", "", "\u00e9" * 300,
                                                    "eval/x", "a\x00b", "time"]))
    if choice == 2:
        value.simple_value = float(rng.choice(["nan", "inf", "-inf", "1e38"]))
    else:  # tensors of any dtype, shape and content
        value.metadata.plugin_data.plugin_name = rng.choice(["scalars", "", "images"])
        value.tensor.dtype = rng.choice([0, 1, 2, 3, 9, 14, 19, 99])
        value.tensor.content = rng.randbytes(rng.choice([0, 1, 2, 4, 8, 9]))
        if rng.random() < 0.5:
            value.tensor.shape.dim.add(size=rng.choice([1, 2, -1, 2**40]))
        value.tensor.half_val.extend(rng.sample([0, 65535, 2**31 - 1, -5], 2))
    return _frame(event.SerializeToString()), False


def test_tensorboard_hostile_records(tmp_path, caplog):
    rng = random.Random(11)
    data, bad, good = b"", [], 0
    for step in range(1, 300):
        if step % 3 == 0:
            data += _frame(_event(step, good=1.0, loss=0.5))
            good += 1
        else:
            framed, is_bad = _hostile_event(rng, step)
            bad += [len(data)] if is_bad else []
            data += framed
    data += _frame(_event(1000, good=1.0))  # the last step, stored once the file settles
    good += 1
    (tmp_path / "logs" / "tb").mkdir(parents=True)
    (tmp_path / "logs" / "tb" / "events.out.tfevents.1.host").write_bytes(
        _frame(_event(0, good=1.0)) + data)
    good += 1
    shift = len(_frame(_event(0, good=1.0)))
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        for _ in range(3):
            mon.tailer.catch_up()
        time.sleep(0.5)  # settle.SETTLE_S: the last step is held until the file is still
        mon.tailer.catch_up()
        healthy(mon, caplog)
        assert query(mon, "SELECT count(good) FROM metrics_all") == [(good,)]
        assert {b + shift for b in bad} <= errors_at(mon)


# ---- JSONL of other trainers, our events and rank files -----------------------------------

JSONL_BAD = [b'{"iter": ' + DEEP.encode() + b"}", b"[1, 2]", b'{"iter": 1, "loss": }',
             b"\xff\xfe\x00", b'{"step": ' + HUGE.encode() + b"}", b"   "]
JSONL_NOISE = [b'{"iter": 3, "timestamp": 1' + b"0" * 400 + b"}",
               b'{"iter": 4, "time": ' + DIGITS.encode() + b"}",
               b'{"iter": 5, "elapsed_time": "99999999999 days, 1:00:00"}',
               b'{"event": "x", "step": 6, "d": ' + FAIRLY_DEEP.encode() + b"}",
               b'{"event": "run_end", "step": 7, "elapsed_s": 1' + b"0" * 400 + b"}",
               b'{"iter": 8, "epoch": 1' + b"0" * 400 + b', "train_loss": 1, "val_loss": 2}',
               b'{"iter": 9, "\\ud800": 1, "a": {"b": {"c": [1]}}}',
               b'{"global_step": 1e400, "loss": NaN}', b'{"_step": 10, "x": "text"}',
               b'{"iter": 11, "loss": 1' + b"0" * 5000 + b"}", b'{"nothing": 1}']


def _jsonl(rng: random.Random, good_line: bytes, count: int):
    lines, bad, good = [], [], 0
    for i in range(count):
        if i % 3 == 0:
            lines.append(good_line % (100 + i))
            good += 1
        elif rng.random() < 0.4:
            lines.append(rng.choice(JSONL_BAD))
            bad.append(len(lines) - 1)
        else:
            lines.append(rng.choice(JSONL_NOISE))
    return lines, bad, good


@pytest.mark.parametrize(("name", "good_line", "count_sql"), [
    ("train_log.jsonl", b'{"iter": %d, "loss": 0.5, "good": 1.0}',
     "SELECT count(good) FROM metrics_all"),
    ("events.jsonl", b'{"event": "good", "step": %d}',
     "SELECT count(*) FROM events WHERE kind = 'good'"),
    ("rank1.jsonl", b'{"step": %d, "step_time_s": 0.5, "good": 1.0}',
     "SELECT count(good) FROM ranks_all"),
])
def test_jsonl_events_and_rank_files_hostile_lines(tmp_path, caplog, name, good_line, count_sql):
    lines, bad, good = _jsonl(random.Random(len(name)), good_line, 300)
    if name == "train_log.jsonl":  # JSONL of another trainer must show a step early on
        lines.insert(0, good_line % 1)
        bad, good = [i + 1 for i in bad], good + 1
    data = b"\n".join(lines) + b"\n"
    (tmp_path / "logs" / "run").mkdir(parents=True)
    (tmp_path / "logs" / "run" / name).write_bytes(data)
    with caplog.at_level(logging.WARNING, "cliffwatch.ingest"), ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        healthy(mon, caplog)
        assert query(mon, count_sql) == [(good,)]
        # an event with a step past 64 bits is kept, its step NULL: a warning
        severity = "%" if name == "events.jsonl" else "error"
        assert {offsets(lines)[i] for i in bad} <= errors_at(mon, severity)
