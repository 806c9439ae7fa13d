"""The real text logs of ../shared/realdata through the real tailer into DuckDB, with no
configuration (issue 19, section 1): the right steps read, validation apart, resumes where
the step goes back and nowhere else, and the runs whose log reached its planned total ended.
Each test states what a person reading the log sees (its README's line)."""

from __future__ import annotations

import shutil

import pytest

from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED, needs_realdata

REALDATA = SHARED / "realdata"
TEXT_RUNS = ("modded-nanogpt-muon", "modded-nanogpt-soap", "nanogpt-tinystories",
             "nanogpt-gpt2-wandb", "torchtitan-vlm-447m", "torchtitan-crash-resume",
             "megatron-ds-qwen7b", "megatron-lm-llama1b-killed", "hf-llama32-sft-quoted",
             "hf-chatglm2-lora-nohup")
pytestmark = needs_realdata


@pytest.fixture(scope="module")
def mon(tmp_path_factory):
    logs = tmp_path_factory.mktemp("realtext") / "logs"
    for run in TEXT_RUNS:
        shutil.copytree(REALDATA / run, logs / run)
    with ingest(logs) as monitor:
        monitor.tailer.catch_up()
        yield monitor


def lines(mon, run: str) -> tuple:
    """(rows, first step, last step) of the run's training line."""
    return query(mon, f"SELECT count(*), min(step), max(step) FROM metrics_all "
                      f"WHERE run = '{run}'")[0]


def first_last(mon, run: str, column: str, table: str = "metrics_all") -> tuple:
    return query(mon, f"SELECT first({column} ORDER BY step), last({column} ORDER BY step) "
                      f"FROM {table} WHERE run = '{run}' AND {column} IS NOT NULL")[0]


def evals(mon, run: str, column: str) -> list[tuple]:
    return query(mon, f"SELECT step, round({column}, 4) FROM evals WHERE run = '{run}' "
                      f"AND kind = 'eval' AND {column} IS NOT NULL ORDER BY step")


def resumes(mon, run: str) -> list[tuple]:
    return query(mon, f"SELECT start_step, prev_step FROM attempts WHERE run = '{run}' "
                      "AND reason <> 'start' ORDER BY attempt")


def status(mon, run: str) -> str:
    return query(mon, f"SELECT status FROM run_status WHERE run = '{run}'")[0][0]


def test_nothing_read_is_an_error(mon):
    assert query(mon, "SELECT file, reason FROM ingest_errors WHERE severity <> 'info'") == []
    assert query(mon, "SELECT run FROM runs ORDER BY run") == [(r,) for r in sorted(TEXT_RUNS)]


@pytest.mark.parametrize(("run", "steps", "val_first", "val_last", "val_count"), [
    # 6,200 steps, train loss 10.92 -> 3.25, val 10.93 -> 3.2785 every 125 steps
    ("modded-nanogpt-muon", 6200, 10.9264, 3.2785, 51),
    # 6,000 steps, val 11.01 -> 3.2763
    ("modded-nanogpt-soap", 6000, 11.0149, 3.2763, 49)])
def test_modded_nanogpt_records(mon, run, steps, val_first, val_last, val_count):
    assert lines(mon, run) == (steps, 1, steps)
    found = evals(mon, run, "val_loss")
    assert (len(found), found[0], found[-1]) == (val_count, (0, val_first), (steps, val_last))
    assert resumes(mon, run) == []  # train_time falling at step 11 is no restart
    assert status(mon, run) == "completed"  # step N/N: the record's end


def test_nanogpt_tinystories(mon):
    # iters 0-6,000 every 10, loss 10.94 -> 1.27, val 10.94 -> 1.30 every 250
    run = "nanogpt-tinystories"
    assert lines(mon, run) == (601, 0, 6000)
    assert first_last(mon, run, "loss") == (10.9409, 1.2711)
    found = evals(mon, run, "val_loss")
    assert (len(found), found[0], found[-1]) == (25, (0, 10.9386), (6000, 1.3023))
    assert resumes(mon, run) == []
    assert status(mon, run) == "running"  # nanoGPT writes no planned total


def test_nanogpt_gpt2_cut_mid_run(mon):
    # iters 0-13,280, loss 10.97 -> 3.13, val 10.99 -> 3.164 every 1,000; ends mid-run
    run = "nanogpt-gpt2-wandb"
    assert lines(mon, run) == (1329, 0, 13280)
    assert first_last(mon, run, "loss") == (10.9733, 3.129)
    found = evals(mon, run, "val_loss")
    assert (len(found), found[0], found[-1]) == (14, (0, 10.9897), (13000, 3.1641))


def test_torchtitan_resumed_run_with_its_clock(mon):
    # a resumed run: training starts at step 6501, 1,000 steps to 7,500, 2 s between lines
    run = "torchtitan-vlm-447m"
    assert lines(mon, run) == (1000, 6501, 7500)
    assert first_last(mon, run, "loss") == (2.22753, 1.84873)
    (median,), = query(mon, f"SELECT median(d) FROM (SELECT time - lag(time) OVER (ORDER BY "
                            f"step) AS d FROM metrics_all WHERE run = '{run}')")
    assert 2.0 <= median <= 2.5
    assert resumes(mon, run) == []  # a late first step is no resume


def test_torchtitan_crash_resume_retries_are_the_steps_going_back(mon):
    # steps 5,001-7,000 over 8 launches; each retry reloads the checkpoint: 5650 -> 5501,
    # 5731 -> 5501, 5531 -> 5501, 6150 -> 6001, 6650 -> 6501; finishes at 7,000
    run = "torchtitan-crash-resume"
    count, first, last = lines(mon, run)
    assert (first, last) == (5001, 7000)
    assert sorted(resumes(mon, run)) == sorted([(5501, 5650), (5501, 5731), (5501, 5531),
                                                (6001, 6150), (6501, 6650)])
    assert count == 2712  # every "step:" line of the file, each once


def test_megatron_deepspeed_iterations_and_validation(mon):
    # 500 iterations, lm loss 12.64 -> 6.23; val 7.67, 6.87, 6.55, 6.43, 6.31 every 100
    run = "megatron-ds-qwen7b"
    assert lines(mon, run) == (500, 1, 500)
    low, high = first_last(mon, run, "loss")
    assert (round(low, 2), round(high, 2)) == (12.64, 6.23)
    assert [(s, round(v, 2)) for s, v in evals(mon, run, "val_loss")] == [
        (100, 7.67), (200, 6.87), (300, 6.55), (400, 6.43), (500, 6.31)]
    assert resumes(mon, run) == []
    assert status(mon, run) == "completed"  # iteration 500/500


def test_megatron_lm_killed_at_344_of_500(mon):
    # iterations 1-344 of 500, lm loss 12.18 -> 4.66, grad norm 111.6 at iteration 5
    run = "megatron-lm-llama1b-killed"
    assert lines(mon, run) == (344, 1, 344)
    assert query(mon, f"SELECT step, grad_norm FROM metrics_all WHERE run = '{run}' "
                      "ORDER BY grad_norm DESC LIMIT 1") == [(5, 111.614)]
    assert first_last(mon, run, "loss") == (12.18301, 4.659249)
    assert status(mon, run) != "completed"  # killed: it never reached 500


def test_hugging_face_quoted_dicts(mon):
    # 167 training dicts over 3 epochs, loss 3.41 -> 0.58; eval 0.7417, 0.7150, 0.7206
    run = "hf-llama32-sft-quoted"
    assert lines(mon, run) == (167, 1, 167)
    assert first_last(mon, run, "loss") == (3.412, 0.5822)
    assert [v for _, v in evals(mon, run, "eval_loss")] == [0.7417, 0.715, 0.7206]
    assert status(mon, run) == "completed"  # the train_runtime summary


def test_hugging_face_plain_dicts_under_nohup(mon):
    # 1,190 dicts over 25 epochs, loss 3.57 -> 0.0023, no eval
    run = "hf-chatglm2-lora-nohup"
    assert lines(mon, run) == (1190, 1, 1190)
    assert first_last(mon, run, "loss") == (3.5663, 0.0023)
    assert query(mon, f"SELECT count(*) FROM evals WHERE run = '{run}' AND kind = 'eval'"
                 ) == [(0,)]
    assert status(mon, run) == "completed"
    assert resumes(mon, run) == []
