"""Any trainer's JSONL as log format v1 (app/ingest/formats/keys.py and jsonl.py): aliases,
nesting, what is dropped, kinds, on hand-written lines, our own golden files (unchanged) and
the real logs in ../shared/realdata."""

from __future__ import annotations

import json
import math
from datetime import datetime

import pytest

from app.ingest.formats import EVAL, EVENT, SUMMARY, TRAIN, jsonl
from app.ingest.formats.keys import STEP_ALIASES, normalise
from app.ingest.parse import decode
from tests.conftest import ROOT, SHARED, needs_realdata

REALDATA = SHARED / "realdata"
GOLDEN = ROOT / "tests" / "data" / "logformat"


def data(obj: dict) -> dict:
    result, why = normalise(obj)
    assert result is not None, why
    return result.data


@pytest.mark.parametrize("alias", STEP_ALIASES)
def test_each_step_alias_is_the_step(alias):
    assert data({alias: 40, "loss": 1.5}) == {"step": 40, "loss": 1.5}


def test_the_first_alias_wins_and_the_others_stay_metrics():
    assert data({"iter": 3, "global_step": 7}) == {"step": 7, "iter": 3}


def test_an_aliass_integral_float_is_an_integer_but_v1_step_is_left_to_ingest():
    assert data({"global_step": 40.0})["step"] == 40
    assert type(data({"global_step": 40.0})["step"]) is int
    assert data({"step": 40.0}) == {"step": 40.0}  # v1 refuses 7.0: the careful path says so


@pytest.mark.parametrize(("key", "value", "target", "expected"), [
    ("elapsed_s", 12.5, "elapsed_s", 12.5),
    ("elapsed_time", "0:00:24", "elapsed_s", 24),
    ("elapsed_time", "5:39:46", "elapsed_s", 20386),
    ("elapsed_time", "12:05:09.5", "elapsed_s", 43509.5),
    ("elapsed_time", "1 day, 2:00:00", "elapsed_s", 93600),  # str(timedelta) past a day
    ("elapsed_time", "3 days, 0:00:01", "elapsed_s", 259201),
    ("elapsed_time", 95.5, "elapsed_s", 95.5),
    ("elapsed_time", "95.5", "elapsed_s", 95.5),
    ("_runtime", 7.25, "elapsed_s", 7.25),
    ("time", 1714564800.5, "time", 1714564800.5),
    ("timestamp", 1714564800, "time", 1714564800),
    ("timestamp", 1714564800123, "time", 1714564800.123),  # milliseconds
    ("timestamp", 1714564800123456, "time", 1714564800.123456),  # microseconds
    ("timestamp", "2024-05-01T12:00:00Z", "time", 1714564800.0),
    ("timestamp", "2024-05-01T14:00:00.250+02:00", "time", 1714564800.25),
    ("timestamp", "2024-05-01 12:00:00+00:00", "time", 1714564800.0),
    ("time", "2024-05-01T12:00:00Z", "time", 1714564800.0),
    ("_timestamp", 1714564800.75, "time", 1714564800.75),
])
def test_each_time_alias_reads(key, value, target, expected):
    assert data({"step": 1, key: value}) == {"step": 1, target: pytest.approx(expected)}


def test_an_iso_time_with_no_offset_is_local_time():
    expected = datetime(2024, 5, 1, 12, 0, 0).timestamp()
    assert data({"step": 1, "timestamp": "2024-05-01T12:00:00"})["time"] == expected


def test_v1_clock_keys_win_and_a_losing_alias_stays_a_metric():
    assert data({"step": 1, "_runtime": 9.0, "elapsed_s": 8.0}) == {
        "step": 1, "_runtime": 9.0, "elapsed_s": 8.0}
    assert data({"step": 1, "timestamp": "not a time", "_timestamp": 5.0}) == {
        "step": 1, "time": 5.0}


def test_nested_objects_are_flattened_with_a_slash():
    assert data({"step": 3, "train": {"loss": 1, "opt": {"lr": 2e-4}}, "eval": {}}) == {
        "step": 3, "train/loss": 1, "train/opt/lr": 2e-4}


def test_a_flattened_key_that_exists_already_keeps_the_first():
    result, _ = normalise({"step": 1, "a/b": 1, "a": {"b": 2}})
    assert result.data == {"step": 1, "a/b": 1}
    assert result.dropped == ("a/b",)


def test_text_lists_and_progress_fields_are_dropped_and_named_once():
    result, _ = normalise({"step": 5, "loss": 2.0, "phase": "train", "tags": ["a"],
                           "percentage": 12.5, "remaining_time": "1:00:00", "total_steps": 90,
                           "buckets": [1, 2], "grad_norm": None, "is_best": True})
    assert result.data == {"step": 5, "loss": 2.0, "buckets": [1, 2], "grad_norm": None,
                           "is_best": True}  # null and booleans: v1 says what ingest does
    assert result.dropped == ("phase", "tags", "percentage", "remaining_time", "total_steps")


def test_a_dict_without_a_step_like_key_is_no_row_and_says_why():
    result, why = normalise({"loss": 1.0, "_step_count": 3, "steps": 4})
    assert result is None
    assert "no step-like key" in why and "current_steps" in why


def test_an_event_is_kept_as_it_is():
    event = {"event": "checkpoint_end", "step": 10, "duration_s": 1.5, "path": "ckpt/10"}
    result, _ = normalise(dict(event))
    assert (result.kind, result.data) == (EVENT, event)


@pytest.mark.parametrize(("obj", "kind"), [
    ({"step": 10, "loss": 2.0, "lr": 1e-4}, TRAIN),
    ({"step": 10}, TRAIN),
    ({"step": 500, "epoch": 1.0, "eval_loss": 0.5, "eval_runtime": 3.1}, EVAL),
    ({"step": 500, "val/loss": 0.5, "val/acc": 0.8}, EVAL),
    ({"step": 500, "Validation_Loss": 0.5}, EVAL),
    ({"step": 500, "test_f1": 0.7}, EVAL),
    ({"step": 500, "loss": 2.0, "val_loss": 2.2}, TRAIN),  # a training point with its val
    ({"step": 500, "value_head/loss": 1.0}, TRAIN),  # "value_", not "val_"
    ({"step": 8660, "epoch": 4.0, "train_loss": 0.29, "train_runtime": 20387.7}, SUMMARY),
    ({"step": 2170, "epoch": 1, "train_loss": 0.4, "val_loss": 0.5}, SUMMARY),
])
def test_kinds(obj, kind):
    assert normalise(obj)[0].kind == kind


def test_a_per_epoch_summary_marks_the_next_epochs_start():
    result, _ = normalise({"epoch": 1, "step": 2170, "train_loss": 0.4, "val_loss": 0.5,
                           "elapsed_s": 100.0})
    assert result.kind == SUMMARY
    assert result.boundary == {"event": "epoch_start", "step": 2170, "epoch": 2,
                               "elapsed_s": 100.0}
    end, _ = normalise({"step": 8660, "epoch": 4.0, "train_loss": 0.29, "train_runtime": 9.0})
    assert end.boundary is None  # the end of training starts no epoch


def test_llama_factorys_closing_line_is_a_summary_not_a_resume():
    line = {"current_steps": 8660, "total_steps": 8660, "epoch": 4.0, "percentage": 100.0,
            "elapsed_time": "5:39:46", "remaining_time": "0:00:00", "throughput": "0.00",
            "total_tokens": 0}
    result, _ = normalise(line)
    assert (result.kind, result.boundary) == (SUMMARY, None)
    last_step = dict(line, current_steps=8650, loss=0.11)
    assert normalise(last_step)[0].kind == TRAIN


GOLDEN_LINES = [pytest.param(raw, id=f"{path.parent.name}/{path.name}:{number}")
                for path in sorted(GOLDEN.rglob("*.jsonl"))
                for number, raw in enumerate(path.read_bytes().splitlines(), 1)]


@pytest.mark.parametrize("raw", GOLDEN_LINES)
def test_a_v1_line_of_our_own_trainer_is_unchanged(raw):
    obj, _ = decode(raw)
    result, _ = normalise(dict(obj))
    assert json.dumps(result.data) == json.dumps(obj)  # order and NaN included
    assert result.dropped == ()
    assert result.kind == (EVENT if "event" in obj else TRAIN)


@needs_realdata
def test_llama_factory_trainer_log_reads_with_its_wall_clock():
    records, problems = jsonl.parse((REALDATA / "hf-mistral-translator" /
                                     "trainer_log.jsonl").read_bytes(), 0)
    train = [r for r in records if r.kind == TRAIN]
    assert len(train) == 866
    # step 8660 of total_steps 8660 ends training (keys.planned_end); its last line has no loss
    assert [r.kind for r in records[866:]] == [SUMMARY, SUMMARY]
    assert [r.data["step"] for r in train] == list(range(10, 8661, 10))
    assert train[0].data == {"step": 10, "loss": 2.4977, "learning_rate": 5.773672055427253e-07,
                             "epoch": 0.004618937644341801, "elapsed_s": 24,
                             "total_tokens": 0}
    assert train[-1].data["elapsed_s"] == 5 * 3600 + 39 * 60 + 46
    elapsed = [r.data["elapsed_s"] for r in train]
    assert elapsed == sorted(elapsed)
    assert [p.severity for p in problems] == ["info"]  # the dropped keys, named once
    for name in ("total_steps", "percentage", "remaining_time", "throughput"):
        assert name in problems[0].reason


@needs_realdata
def test_slm_metrics_keep_their_steps_going_back():
    path = REALDATA / "slm-training-restarts" / "metrics.jsonl"
    records, problems = jsonl.parse(path.read_bytes(), 0)
    assert problems == []
    assert len(records) == len(path.read_bytes().splitlines()) == 398
    steps = [r.data["step"] for r in records]
    back = [(steps[i - 1], steps[i]) for i in range(1, len(steps)) if steps[i] <= steps[i - 1]]
    assert back == [(20, 20), (40, 20), (7580, 7520), (7560, 7520)]
    assert {tuple(r.data) for r in records} == {("step", "loss", "lr", "tokens", "usd")}


def test_jsonl_lines_offsets_and_problems():
    lines = [b'\xef\xbb\xbf{"iter": 1, "train": {"loss": 2.5}}\r\n', b'not json\n',
             b'{"loss": 1}\n', b'[1, 2]\n', b'{"loss": 2}\n', b'{"it": 2, "val_loss": NaN}\n']
    at = [sum(map(len, lines[:i])) for i in range(len(lines))]
    text = b"".join(lines) + b'{"it": 3, "loss"'  # the last line is not whole yet
    records, problems = jsonl.parse(text, 0)
    assert [(r.offset, r.kind) for r in records] == [(0, TRAIN), (at[5], EVAL)]
    assert records[0].data == {"step": 1, "train/loss": 2.5}  # BOM and CRLF: still read
    assert math.isnan(records[1].data["val_loss"])
    assert [(p.offset, p.severity) for p in problems] == [
        (at[1], "error"), (at[3], "error"), (at[2], "info")]
    assert "2 line(s) have no step-like key" in problems[2].reason
    later, _ = jsonl.parse(b'{"it": 9}\n', 5000)  # base: where data starts in the file
    assert [(r.offset, r.data) for r in later] == [(5000, {"step": 9})]
