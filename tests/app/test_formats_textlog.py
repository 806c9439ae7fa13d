"""Text logs as people have them (app/ingest/formats/textlog.py), on small fixtures of each
shape written for these tests (tests/data/textlog/), and through the real tailer: a log that
opens with more config than detection used to look at, a README that is no log, a notes file
that becomes a log as it grows, printed dicts counted on across reads."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import pytest

from app.ingest.formats import EVAL, EVENT, SUMMARY, TRAIN, Record, detect, textlog
from app.ingest.formats.keymap import KeyMap
from tests.app.test_ingest_bad_input import ingest, query

DATA = Path(__file__).parents[1] / "data" / "textlog"


def read(name: str, after: int | None = None) -> dict[str, list[dict]]:
    records, problems = textlog.parse((DATA / name).read_bytes(), 0, after=after)
    assert problems == []
    kinds: dict[str, list[dict]] = {TRAIN: [], EVAL: [], SUMMARY: [], EVENT: []}
    for record in records:
        kinds[record.kind].append(record.data)
    return kinds


def steps(rows: list[dict]) -> list[int]:
    return [row["step"] for row in rows]


def test_llm_c_stdout_past_its_banner_table_with_units_and_val_loss_after_a_step():
    got = read("llmc_stdout.log")
    assert steps(got[TRAIN]) == [1, 2, 3, 4, 5, 6]
    assert got[TRAIN][0] == {"step": 1, "loss": 10.51, "grad_norm": 15.2, "lr": 6e-4,
                             "dt_ms": 3787.44, "bf16_mfu": 42.1, "tok_per_sec": 135_000.0}
    # "val loss 11.0098" before the first step has no step to take; the others do
    assert got[EVAL] == [{"step": 3, "val_loss": 8.9}, {"step": 6, "val_loss": 8.3}]
    assert got[SUMMARY] == [{"step": 6, "planned_steps": 6}]  # step 6/6: training ended


def test_modded_nanogpt_record_after_its_pasted_source_and_nvidia_smi():
    got = read("modded_record.txt")
    assert steps(got[TRAIN]) == list(range(1, 9))
    assert got[TRAIN][0]["train_loss"] == 10.6 and math.isnan(got[TRAIN][0]["step_avg"])
    assert got[TRAIN][3]["train_time"] == 74864.0 and got[TRAIN][3]["step_avg"] == 216.5
    assert steps(got[EVAL]) == [0, 4, 8] and got[EVAL][0]["val_loss"] == 10.9264
    assert got[SUMMARY] == [{"step": 8, "planned_steps": 8}]


def test_nanogpt_iters_and_its_eval_line_going_apart_whole():
    got = read("nanogpt_train.log")
    assert steps(got[TRAIN]) == [0, 10, 20, 30, 40]
    # "time 35.21ms" is a duration: not v1's clock key
    assert got[TRAIN][1] == {"step": 10, "loss": 9.7409, "time_ms": 598.16, "mfu": 46.46}
    assert got[EVAL][1] == {"step": 20, "train_loss": 8.94, "val_loss": 8.95}
    assert got[SUMMARY] == []  # no planned total written


def test_torchtitan_past_prefixes_and_colours_with_its_clock_and_thousands():
    got = read("torchtitan_train.log")
    assert steps(got[TRAIN]) == list(range(6501, 6507))  # not the JSON config line
    first = got[TRAIN][0]
    assert first["tps"] == 1815.0 and first["memory"] == 23.75 and first["mfu"] == 4.34
    assert first["time"] == pytest.approx(time.mktime((2026, 5, 10, 20, 47, 31, 0, 0, -1))
                                          + 0.851)
    assert got[TRAIN][1]["time"] - first["time"] == pytest.approx(2.0)
    assert got[EVAL] == []


def test_megatron_iterations_once_each_with_validation_apart():
    got = read("megatron_ds.log")
    # DeepSpeed's own "steps: N loss: ..." repeats the iteration: not a second row
    assert steps(got[TRAIN]) == [1, 2, 3, 4]
    first = got[TRAIN][0]
    assert (first["loss"], first["grad_norm"], first["lr"]) == (11.6, 20.2, 2e-7)
    assert first["elapsed_time_per_iteration"] == 15166.9 and first["grad_scale"] == 1.0
    assert got[EVAL] == [{"step": 2, "val_loss": 7.4, "val_ppl": 2135.573},
                         {"step": 4, "val_loss": 7.2, "val_ppl": 2135.573}]
    assert got[SUMMARY] == [{"step": 4, "planned_steps": 4}]


def test_transformers_5_quoted_dicts_among_tqdm_redraws():
    got = read("hf_quoted.txt")
    assert steps(got[TRAIN]) == [1, 2, 3, 4]  # each dict's ordinal: the log prints no step
    assert got[TRAIN][0] == {"step": 1, "loss": 3.412, "grad_norm": 0.9297,
                             "learning_rate": 1.071e-05, "num_tokens": 18080.0,
                             "mean_token_accuracy": 0.5337, "epoch": 0.5}
    assert [(e["step"], e["eval_loss"]) for e in got[EVAL]] == [(1, 0.7417), (4, 0.715)]
    assert steps(got[SUMMARY]) == [4] and got[SUMMARY][0]["train_runtime"] == 2918.0


def test_an_older_trainer_under_nohup_counts_on_from_the_steps_stored():
    got = read("hf_nohup.txt", after=40)
    assert steps(got[TRAIN]) == [41, 42, 43, 44]
    assert got[TRAIN][1]["loss"] == 1.7832 and got[TRAIN][1]["epoch"] == 1.0
    assert steps(got[SUMMARY]) == [44]


def test_fairseq_updates_with_its_validation_and_epoch_summary_apart():
    """A log this reader was not written against: fairseq counts num_updates, marks its
    lines "| valid |" and "| train |" (the epoch's summary at its last update's step)."""
    got = read("fairseq_train.log")
    assert steps(got[TRAIN]) == [100, 200, 300]
    assert (got[TRAIN][0]["loss"], got[TRAIN][0]["grad_norm"], got[TRAIN][0]["epoch"]) == (
        8.1, 0.8, 1)
    assert [(e["step"], e["val_loss"]) for e in got[EVAL]] == [(300, 5.912)]
    assert [(s["step"], s["loss"]) for s in got[SUMMARY]] == [(300, 7.512)]


@pytest.mark.parametrize("line", [
    b"step 1/20 | loss 2.5 |", b"step=1 loss=2.5", b"step: 1  loss: 2.5", b"| step 1 | loss 2.5 |",
    b"2024-05-01 12:00:00 INFO step 1 loss 2.5", b"\x1b[38;2;180;60;0mstep:1\x1b[39m loss:2.5",
    b"Train step 1, loss: 2.5", b"iteration 1 | loss: 2.5E+00"])
def test_each_form_of_one_line(line):
    (record,), _ = textlog.parse(line + b"\n", 0)
    assert (record.kind, record.data["step"], record.data["loss"]) == (TRAIN, 1, 2.5)


def test_a_runs_own_step_key_and_names_count_in_text_lines_too():
    keymap = KeyMap(step="Batch", rename={"objective": "loss"})
    (record,), _ = textlog.parse(b"Batch 12 | objective 0.5\n", 0, keymap)
    assert record.data == {"step": 12, "loss": 0.5}
    assert textlog.parse(b"Batch 12 | objective 0.5\n", 0) == ([], [])


@pytest.mark.parametrize("line", [
    b"for step in range(10):",  # "Training starts at step 6501": a resume (textevents)
    b"    x = dict(step=1, loss=2.0)  # the first step and a made up loss value",
    b"[Mon May 11 05:45:08 AM UTC 2026] STAGE 2 (target step 7000, max 30 retries)",
    b"  eval_iters ...................................... 10", b"max_iters = 6000",
    b"  0%|          | 10/11900 [00:12<3:16:55,  1.01it/s]",
    b"[Zeus] Steps 1-50: Energy=1002.43 Wh",
    b'{"dim": 1024, "n_layers": 24}', b"{'eos_token_id': 128009, 'pad_token_id': 128009}",
    b"The val loss 3.2 was the best of 4 runs.", b"step 1 of the recipe"])
def test_not_a_log_line(line):
    assert textlog.parse(line + b"\n", 0, after=5) == ([], [])


@pytest.mark.parametrize("text", [b"{'loss': " * 50_000 + b"1",
                                  b"{" * 30 + b"'loss': 1" + b"}" * 30,
                                  b"{'loss': [" + b"1, " * 20_000 + b"1]}"])
def test_a_hostile_printed_dict_is_no_row_and_no_crash(text):
    assert textlog.parse(text + b"\n", 0) == ([], [])


@pytest.mark.parametrize("line", [b"step " + b"word " * 200_000, b"step 1 " + b"a" * 1_000_000,
                                  b"step " + b"5%|" * 300_000, b"step 1 " + b"k: 1 " * 150_000])
def test_a_line_of_a_megabyte_is_read_at_once(line):
    """Words with no number after them backtracked quadratically before keys were bounded
    (measured: 1,000 words 0.9 s, 4,000 words 20 s); each of these is linear now."""
    records, problems = textlog.parse(line + b"\n", 0)
    assert problems == [] and len(records) <= 1


def test_a_planned_total_of_thousands_of_digits_is_no_total():
    total = b"0" * 19 + b"1" + b"0" * 4400  # int() refuses past 4,300 digits
    assert textlog.parse(b"step 5/" + total + b" loss 1\n", 0) == (
        [Record(0, TRAIN, {"step": 5, "loss": 1.0})], [])


def test_a_readme_is_not_a_log_yet_and_a_whole_sample_of_prose_is_none():
    head = (DATA / "README.txt").read_bytes()
    assert textlog.parse(head, 0) == ([], [])
    assert detect.detect("README.txt", head)[0] == detect.PENDING
    prose = head * (detect.TEXT_SNIFF_BYTES // len(head) + 1)
    fmt, why = detect.detect("notes.txt", prose[:detect.TEXT_SNIFF_BYTES])
    assert fmt is None and "1 MiB" in why


def test_through_the_tailer_a_late_first_line_a_readme_and_a_notes_file_that_grows(tmp_path):
    logs = tmp_path / "logs"
    for run in ("megatron", "docs", "later", "hf"):
        (logs / run).mkdir(parents=True)
    config = b"".join(b"  arg_%05d ........................ %d\n" % (i, i) for i in range(3000))
    assert len(config) > detect.SNIFF_BYTES  # what was looked at before this reader
    (logs / "megatron" / "stdout.log").write_bytes(config
                                                   + (DATA / "megatron_ds.log").read_bytes())
    (logs / "docs" / "README.txt").write_bytes((DATA / "README.txt").read_bytes())
    notes = logs / "later" / "slurm-42.out"
    notes.write_bytes(b"srun: job 42 queued and waiting for resources\n")
    hf = (DATA / "hf_nohup.txt").read_bytes()
    cut = hf.index(b"{'loss': 1.1888")
    (logs / "hf" / "train_log.txt").write_bytes(hf[:cut] + b"\n")
    with ingest(logs) as mon:
        notes.write_bytes(notes.read_bytes() + (DATA / "nanogpt_train.log").read_bytes())
        with (logs / "hf" / "train_log.txt").open("ab") as file:
            file.write(hf[cut:])
        mon.tailer.catch_up()
        mon.tailer.tick(discover=True)
        rows = query(mon, "SELECT run, count(*), min(step), max(step) FROM metrics_all "
                          "GROUP BY run ORDER BY run")
        assert rows == [("hf", 4, 1, 4), ("later", 5, 0, 40), ("megatron", 4, 1, 4)]
        assert query(mon, "SELECT run, count(*) FROM evals GROUP BY run ORDER BY run") == [
            ("hf", 1), ("later", 3), ("megatron", 3)]
        assert query(mon, "SELECT file, reason FROM ingest_errors WHERE severity <> 'info'"
                     ) == []
        # said once each: the README is no log so far, nor was the SLURM file when it queued
        notes = query(mon, "SELECT file, reason FROM ingest_errors ORDER BY file")
        assert [file for file, _ in notes] == ["docs/README.txt", "later/slurm-42.out"]
        assert all(why.startswith("not a log yet: no line with a step-like key")
                   and why.endswith("looked at again as it grows") for _, why in notes)
        assert query(mon, "SELECT run FROM runs ORDER BY run") == [
            ("hf",), ("later",), ("megatron",)]  # no run for the README
        assert query(mon, "SELECT reason FROM attempts WHERE reason <> 'start'") == []


TEXT_BAD = [f"step {'9' * 23} | loss 1".encode(), f"iter {'1' + '0' * 5000}: loss 1".encode(),
            b"step:18446744073709551616 train_loss:1"]
TEXT_NOISE = [b"step 1 loss abc", b"\xff\xfe step x loss 1", b"{'loss': " * 300 + b"1",
              b"{" * 5000 + b"}" * 5000, b"{'loss': 1e999, 'epoch': '\xff'}", b"\x00" * 30,
              b"\x1b[38;2;1;2;3m\x1b[0m\x1b[", b"step", b"| | | |", b"{'loss': [1, {2: 3}]}",
              b"eval_loss " + b"9" * 400, b"", b"\r\r\r", b"step 2 " + b"k: 1 " * 2000]


def test_hostile_text_lines_through_the_tailer(tmp_path, caplog):
    """Hostile lines among good ones: every good line stored once, every step past 64 bits an
    error at its offset, nothing else said, and the file read to its end."""
    from tests.app.test_ingest_attack_formats import read_fuzzed

    rng = random.Random(19)
    lines, bad, good = [b"step 0 | loss 2.0 | good 1"], [], 1
    for step in range(1, 300):
        if step % 3 == 0:
            lines.append(b"step %d | loss 0.5 | good 1" % (10**6 + step))
            good += 1
        elif rng.random() < 0.3:
            lines.append(rng.choice(TEXT_BAD))
            bad.append(len(lines) - 1)
        elif rng.random() < 0.8:
            lines.append(rng.choice(TEXT_NOISE))
        else:
            lines.append(bytes(b for b in rng.randbytes(rng.randint(0, 60)) if b != 10))
    read_fuzzed(tmp_path, caplog, "noisy/train.log", lines,
                "SELECT count(good) FROM metrics_all", good, bad)


def test_a_text_log_skipped_when_only_llm_c_was_read_is_read_after_an_upgrade(tmp_path):
    """A database from before this reader holds nanoGPT's train.log as kind llmc, skipped
    ("no llm.c line"): at the next start it is asked again, and read; a file another log of
    its folder wins over (our metrics.jsonl) stays skipped."""
    logs = tmp_path / "logs"
    (logs / "nano").mkdir(parents=True)
    (logs / "ours").mkdir()
    (logs / "nano" / "train.log").write_bytes((DATA / "nanogpt_train.log").read_bytes())
    (logs / "ours" / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    (logs / "ours" / "stdout.log").write_bytes((DATA / "nanogpt_train.log").read_bytes())
    with ingest(logs) as mon:
        assert query(mon, "SELECT run, count(*) FROM metrics_all GROUP BY run ORDER BY run"
                     ) == [("nano", 5), ("ours", 1)]
        cursor = mon.db.cursor()  # as the version before wrote it: no rows, kind llmc, skipped
        cursor.execute("DELETE FROM metric_rows WHERE file_id IN (SELECT file_id FROM files "
                       "WHERE path = 'nano/train.log')")
        cursor.execute("DELETE FROM eval_rows")
        cursor.execute("DELETE FROM attempts WHERE run = 'nano'")
        cursor.execute("UPDATE files SET kind = 'llmc', state = 'skipped', \"offset\" = 0, "
                       "lines = 0, last_step = NULL, attempt = 0 WHERE path LIKE '%.log'")
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        assert query(mon, "SELECT run, count(*) FROM metrics_all GROUP BY run ORDER BY run"
                     ) == [("nano", 5), ("ours", 1)]
        assert query(mon, "SELECT path, state FROM files WHERE path LIKE '%.log' ORDER BY path"
                     ) == [("nano/train.log", "ok"), ("ours/stdout.log", "skipped")]


def test_a_growing_text_file_is_looked_at_from_where_it_was_last_looked_at(tmp_path):
    """A file that is no log yet (a wandb debug log, a job waiting in its queue) is read on
    from its last whole line at each look, not from its start: its first log line is found
    all the same."""
    path = tmp_path / "logs" / "job" / "slurm-7.out"
    path.parent.mkdir(parents=True)
    chatter = b"".join(b"2024-05-01 12:00:%02d heartbeat %d ok\n" % (i % 60, i)
                       for i in range(2000))
    path.write_bytes(chatter)
    with ingest(tmp_path / "logs") as mon:
        for _ in range(3):
            before = mon.tailer.bytes_read
            with path.open("ab") as file:
                file.write(b"2024-05-01 12:01:00 heartbeat again ok\n" * 10)
            mon.tailer.tick(discover=True)
            assert mon.tailer.bytes_read - before < 1000  # the 390 new bytes, not the file
        with path.open("ab") as file:
            file.write(b"step 1 | loss 2.5\nstep 2 | loss 2.4\n")
        mon.tailer.tick(discover=True)
        mon.tailer.catch_up()
        assert query(mon, "SELECT step, loss FROM metrics_all ORDER BY step") == [
            (1, 2.5), (2, 2.4)]
