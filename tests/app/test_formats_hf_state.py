"""Hugging Face trainer_state.json as v1 records (app/ingest/formats/hf_state.py): the real
Mistral translator state in ../shared/realdata, rewrites as the Trainer does them, and files
cut mid-rewrite."""

from __future__ import annotations

import json
import math

import pytest

from app.ingest.formats import EVAL, EVENT, SUMMARY, TRAIN, hf_state
from tests.conftest import SHARED, needs_realdata

STATE = SHARED / "realdata" / "hf-mistral-translator" / "trainer_state.json"
NAN = float("nan")


def dump(state: dict) -> bytes:
    """As the Trainer writes it (TrainerState.save_to_json)."""
    return (json.dumps(state, indent=2, sort_keys=True) + "\n").encode()


def state_with(entries: list[dict], **top) -> bytes:
    return dump({"epoch": 0, "global_step": 0, "log_history": entries,
                 "num_train_epochs": 3, **top})


@pytest.fixture(scope="module")
def real() -> bytes:
    return STATE.read_bytes()


@needs_realdata
def test_the_real_state_866_training_entries_a_summary_and_three_epoch_starts(real):
    read = hf_state.parse(real)
    assert (read.status, read.entries, read.last_step, read.problems) == ("ok", 867, 8660, [])
    kinds = [r.kind for r in read.records]
    assert kinds.count(TRAIN) == 866 and kinds.count(SUMMARY) == 1 and kinds.count(EVAL) == 0
    events = [r.data for r in read.records if r.kind == EVENT]
    assert [e for e in events if e["event"] == "epoch_start"] == [
        {"event": "epoch_start", "step": s, "epoch": e}
        for s, e in ((2170, 1), (4330, 2), (6500, 3))]  # not 8660: the end
    # save_steps 500: a save inferred at each multiple the log passes (issue 19)
    assert [e["step"] for e in events if e["event"] == "checkpoint_end"] == list(
        range(500, 8660, 500))
    assert read.records[-1].data == {
        "step": 8660, "epoch": 4.0, "total_flos": 2.380746355434848e+18,
        "train_loss": 0.2891847992741759, "train_runtime": 20387.7129,
        "train_samples_per_second": 6.796, "train_steps_per_second": 0.425}
    grad = max((r.data["grad_norm"], r.data["step"]) for r in read.records if r.kind == TRAIN)
    assert grad == (pytest.approx(16.2518, abs=1e-4), 50)  # the early spike


@needs_realdata
def test_each_records_offset_is_its_entrys_brace(real):
    history = json.loads(real)["log_history"]
    rows = [r for r in hf_state.parse(real).records if r.kind != EVENT]
    text = real.decode()  # ASCII: a byte offset is a character offset
    for record, entry in zip(rows, history, strict=True):
        assert json.JSONDecoder().raw_decode(text, record.offset)[0] == entry


@needs_realdata
def test_a_rewrite_with_three_more_entries_gives_exactly_those_three(real):
    first = hf_state.parse(real)
    state = json.loads(real)
    summary = state["log_history"].pop()  # appended where the Trainer appends, then resaved
    state["log_history"] += [{"epoch": 4.0 + i / 2165, "grad_norm": 1.0, "learning_rate": 0.0,
                              "loss": 0.1, "step": 8660 + 10 * i} for i in (1, 2)] + [summary]
    again = hf_state.parse(dump(state), first.entries - 1, 8660)  # as if read before the end
    assert again.status == "ok" and again.entries == 869
    assert [(r.kind, r.data["step"]) for r in again.records] == [
        (TRAIN, 8670), (TRAIN, 8680), (SUMMARY, 8660)]
    nothing = hf_state.parse(dump(state), again.entries, again.last_step)
    assert (nothing.status, nothing.records) == ("ok", [])


def test_appending_one_entry_and_rewriting_gives_exactly_one_row():
    entries = [{"epoch": 0.1 * i, "loss": 2.0 / i, "step": 10 * i} for i in range(1, 6)]
    read = hf_state.parse(state_with(entries))
    assert len(read.records) == 5
    entries.append({"epoch": 0.6, "loss": 0.3, "step": 60})
    more = hf_state.parse(state_with(entries, global_step=60), read.entries, read.last_step)
    assert [(r.kind, r.data) for r in more.records] == [
        (TRAIN, {"epoch": 0.6, "loss": 0.3, "step": 60})]


@needs_realdata
def test_a_file_cut_mid_rewrite_is_tried_again_later(real):
    for cut in (0, 1, 100, len(real) // 2, len(real) - 3):
        read = hf_state.parse(real[:cut], 500, 5000)
        assert (read.status, read.records, read.problems) == ("incomplete", [], [])


def test_a_shorter_or_different_history_is_read_again_whole():
    entries = [{"epoch": 0.1 * i, "loss": 1.0, "step": 10 * i} for i in range(1, 4)]
    shorter = hf_state.parse(state_with(entries), 10, 100)
    assert (shorter.status, len(shorter.records)) == ("rewritten", 3)
    other = hf_state.parse(state_with(entries), 2, 999)  # entry 2 is not the step stored
    assert (other.status, len(other.records)) == ("rewritten", 3)


def test_eval_entries_kept_apart_and_an_epoch_crossed_at_an_eval_entry():
    entries = [{"epoch": 0.5, "loss": 1.0, "step": 5},
               {"epoch": 1.0, "eval_loss": 0.9, "eval_runtime": 2.0, "step": 10},
               {"epoch": 1.5, "loss": NAN, "step": 15},
               {"epoch": 3.0, "loss": 0.2, "step": 30},
               {"epoch": 3.0, "step": 30, "train_loss": 0.5, "train_runtime": 9.0}]
    read = hf_state.parse(state_with(entries))
    assert [(r.kind, r.data["step"]) for r in read.records] == [
        (TRAIN, 5), (EVENT, 10), (EVAL, 10), (TRAIN, 15), (TRAIN, 30), (SUMMARY, 30)]
    assert read.records[1].data == {"event": "epoch_start", "step": 10, "epoch": 1}
    assert math.isnan(read.records[3].data["loss"])  # json.dumps writes NaN; it is read


def test_offsets_are_bytes_when_the_state_holds_non_ascii_text():
    text = dump({"best_model_checkpoint": "ckpt", "log_history": [
        {"loss": 1.0, "step": 1}, {"loss": 2.0, "step": 2}], "trial_name": "x"})
    text = text.replace(b'"ckpt"', '"ckpt-é-中"'.encode())  # ensure_ascii=False writers
    records = hf_state.parse(text).records
    assert [text[r.offset:r.offset + 1] for r in records] == [b"{", b"{"]
    assert [r.data["step"] for r in records] == [1, 2]


def test_an_entry_without_a_step_is_a_problem_and_a_file_without_history_invalid():
    read = hf_state.parse(state_with([{"loss": 1.0}, {"loss": 0.5, "step": 2}]))
    assert [r.data["step"] for r in read.records] == [2]
    assert [p.severity for p in read.problems] == ["error"]
    assert "no step-like key" in read.problems[0].reason
    invalid = hf_state.parse(b'{"model_type": "llama"}')
    assert invalid.status == "invalid" and invalid.problems[0].severity == "error"
