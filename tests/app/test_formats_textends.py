"""Runs from other trainers end (issue 19, section 0): the lines that say training ended are
``run_end`` events (app/ingest/formats/textevents.py), so runs.status becomes ``completed``
through the events path, a crash line is ``failed``, and a relaunch in the same log
(``run_start``) puts the run back to running. A save whose end line never comes but after
which the run ended or was relaunched is no save still open: the stall rule (the real alert
engine, as tests/app/test_alert_stall.py runs it) pages nobody about it.
Fixtures: tests/data/textlog/ends_*, each in its trainer's wording.
"""

from __future__ import annotations

import re
import shutil
import time
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from app.alerts.rules import Rule
from app.ingest.formats import EVENT, textlog
from tests.app.test_alert_engine import Bench, bench  # noqa: F401 (a fixture)
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED, needs_realdata, run_cli

DATA = Path(__file__).parents[1] / "data" / "textlog"
RUN = ("run_start", "run_end")
STALL = Rule(name="stall", type="stall", severity="critical", stall_factor=10.0, min_s=5.0,
             checkpoint_budget_s=30.0)


def ends(data: bytes) -> list[tuple]:
    """(kind, step, status) of each run_start / run_end ``data`` gives, in order."""
    records, problems = textlog.parse(data, 0)
    assert problems == []
    found = [r for r in records if r.kind == EVENT and r.data["event"] in RUN]
    for record in found:  # the log says it: logged, and the source quotes the line
        assert record.data["inferred"] is False
        assert record.data["source"].startswith("log line '")
        assert f"(byte {record.offset})" in record.data["source"]
    return [(r.data["event"], r.data["step"], r.data.get("status")) for r in found]


CASES = {
    # the launch's run_start at step 0 (a fresh start), the end after the last-step save
    "ends_torchtitan.log": [("run_start", 0, None), ("run_end", 8, "completed")],
    # "***** Running training *****", then the line between two blank ones at INFO
    "ends_hf_trainer.txt": [("run_start", None, None), ("run_end", 2, "completed")],
    # print_datetime's "[before the start of training step]" and "[after training is done]"
    "ends_megatron.log": [("run_start", None, None), ("run_end", 3, "completed")],
    # the fit loop's "`Trainer.fit` stopped: `max_epochs=2` reached." (at the last save's step)
    "ends_lightning.log": [("run_end", 100, "completed")],
    # train_gpt2.cu's table of settings at its launch, "total average iteration time" after
    # its loop
    "ends_llmc.log": [("run_start", None, None), ("run_end", 10, "completed")],
    # each ATTEMPT of the wrapper starts at its checkpoint's step; torchelastic's two
    # "failed (exitcode: -6)" lines (one per rank) are one end, failed; the retry completes
    "ends_crash_resume.log": [("run_start", 5500, None), ("run_end", 5504, "failed"),
                              ("run_start", 5500, None), ("run_end", 5506, "completed")],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_trainers_end_line_is_a_run_end(name):
    assert ends((DATA / name).read_bytes()) == CASES[name]


def test_the_end_quotes_its_line():
    records, _ = textlog.parse(b"step: 7  loss: 1.0\n[rank0]:[titan] 2026-05-10 21:26:27,912 "
                               b"- root - INFO - Training completed\n", 100)
    (end,) = [r.data for r in records if r.kind == EVENT]
    assert end == {"event": "run_end", "step": 7, "status": "completed", "inferred": False,
                   "source": "log line 'Training completed' (byte 119)", "time": end["time"]}


@pytest.mark.parametrize("line", [
    # errors, tracebacks and kills: every rank prints them, some are caught, a kill names no run
    b"[rank6]:   what():  CUDA error: device-side assert triggered",
    b"  torch.AcceleratorError: CUDA error: device-side assert triggered",
    b"Traceback (most recent call last):",
    b"  exitcode  : -6 (pid: 1861587)",
    b"launch_8gpu_mm.sh: line 258: 1922528 Killed                  torchrun --nproc_per_node=8",
    # a script's own words, and a wrapper's, about an epoch or an attempt
    b"Epoch 3: Training completed",
    b"[Mon May 11 06:33:19 AM UTC 2026] ATTEMPT #1 done rc=1 last_step=5650",
    # Lightning with nothing to train is no planned end
    b"`Trainer.fit` stopped: No training batches.",
    # pasted source: the call, not its message
    b'    logger.info("Training completed")',
    b"    print_datetime('after training is done')",
    b'    printf0("total average iteration time: %f ms\\n", total / (n - 1) * 1000);',
])
def test_lines_that_do_not_say_training_ended(line):
    assert ends(b"step: 5  loss: 1.0\n" + line + b"\n") == []


@pytest.mark.parametrize(("name", "relaunch"), [
    # trained on from its last checkpoint: torchtitan's launch resumes at step 8
    ("ends_torchtitan.log", b"[rank0]:[titan] 2026-05-10 21:30:00,000 - root - INFO - Loading "
                            b"the checkpoint at step 8.\n[rank0]:[titan] 2026-05-10 21:30:01,000"
                            b" - root - INFO - Training starts at step 9\n"),
    # the same command again, its output appended (tee -a)
    ("ends_llmc.log", b"| train_num_batches     | 20    |\n"),
])
def test_a_relaunch_after_the_end_runs_again(name, relaunch):
    """The run's status is the last run_start or run_end: running again."""
    text = (DATA / name).read_bytes()
    assert ends(text)[-1][0] == "run_end"
    assert ends(text + relaunch)[-1][0] == "run_start"


def status(mon) -> str:
    return query(mon, "SELECT status FROM run_status WHERE run = 'titan'")[0][0]


def test_a_crash_fails_the_run_and_its_relaunch_runs_it_again(tmp_path):
    """Read as it is written, through the real tailer: failed at the crash, running again at
    the wrapper's next ATTEMPT (a run_start, in a later read), completed at the end."""
    text = (DATA / "ends_crash_resume.log").read_bytes()
    crash = text.index(b"[Mon May 11 05:46:49")  # the next ATTEMPT
    relaunch = text.index(b"step: 5503  loss:  0.74")
    log = tmp_path / "logs" / "titan" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(text[:crash])
    with ingest(tmp_path / "logs") as mon:
        seen = [status(mon)]
        for upto in (relaunch, len(text)):
            log.write_bytes(text[:upto])
            mon.tailer.catch_up()
            seen.append(status(mon))
    assert seen == ["failed", "running", "completed"]


# --- the real logs (../shared/realdata) ------------------------------------------------------

REAL = ("torchtitan-crash-resume", "torchtitan-vlm-447m", "megatron-lm-llama1b-killed")


@pytest.fixture(scope="module")
def real_status(tmp_path_factory):
    logs = tmp_path_factory.mktemp("textends") / "logs"
    for name in REAL:
        shutil.copytree(SHARED / "realdata" / name, logs / name)
    done = run_cli("ingest", "--logdir", str(logs), "--once", timeout=300)
    assert done.returncode == 0, done.stderr
    db = duckdb.connect(str(logs / ".cliffwatch" / "cliffwatch.duckdb"), read_only=True)
    try:
        status = dict(db.execute("SELECT run, status FROM run_status").fetchall())
        ended = db.execute("SELECT run, step, data->>'status' FROM events WHERE kind = 'run_end' "
                           "ORDER BY run, rowid").fetchall()
    finally:
        db.close()
    return status, ended


@needs_realdata
@pytest.mark.parametrize(("name", "expected"), [
    # "Training completed" after the last-step save (README: runs 1,000 steps to 7,500)
    ("torchtitan-vlm-447m", "completed"),
    # 8 launches, three crashes; "finishes `Training completed` at 7,000"
    ("torchtitan-crash-resume", "completed"),
    # "Stops at 344 with no end-of-training message — the job was killed"
    ("megatron-lm-llama1b-killed", "running"),
])
def test_the_real_logs_end_as_their_readme_says(real_status, name, expected):
    assert real_status[0][name] == expected


@needs_realdata
def test_the_real_crashes_are_failed_ends_and_the_last_launch_completes(real_status):
    """The three CUDA-error crashes (last steps 5650, 6150, 6650), then 7,000 completed."""
    assert [(step, why) for run, step, why in real_status[1]
            if run == "torchtitan-crash-resume"] == [
        (5650, "failed"), (6150, "failed"), (6650, "failed"), (7000, "completed")]
    assert [why for run, _, why in real_status[1] if run == "torchtitan-vlm-447m"] == [
        "completed"]


# --- the stall rule on such logs (the real alert engine) -------------------------------------

def dated_now(text: bytes) -> bytes:
    """The fixture with its clock moved to now (ends 1 s ago): a log dated an hour back is
    history to the alert rules (alerts/engine_old_logs.sql), which never stalls."""
    start = time.time() - 8

    def moved(match: re.Match) -> bytes:
        minutes, seconds, ms = (int(g) for g in match.groups())
        when = datetime.fromtimestamp(start + (minutes - 25) * 60 + seconds + ms / 1000)
        return when.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3].encode()

    return re.sub(rb"2026-05-10 21:(\d\d):(\d\d),(\d{3})", moved, text)


def write_log(b: Bench, text: bytes) -> float:
    log = b.logs / "titan" / "train.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(text)
    return log.stat().st_mtime


def test_a_finished_torchtitan_log_fires_no_stall(bench):  # noqa: F811
    """Its last-step save has no end line; 'Training completed' follows it: no page, not
    'checkpoint at step 8 has not ended' once the checkpoint budget (30 s) is past."""
    b = bench([STALL])
    t0 = write_log(b, dated_now((DATA / "ends_torchtitan.log").read_bytes()))
    b.step()
    for later in (10, 60, 600):
        b.step(t0 + later)
    assert b.notes() == []


def test_a_save_start_then_a_relaunch_is_no_save_still_open(bench):  # noqa: F811
    """A save with no end, then the wrapper's next ATTEMPT loading the checkpoint, then
    silence: the launch hangs, which is a stall on the run's own budget (5 s here), not a
    save given the checkpoint budget (30 s)."""
    b = bench([STALL])
    text = (DATA / "ends_torchtitan.log").read_bytes()
    save = text.index(b"[rank0]:[titan] 2026-05-10 21:25:05,000")  # after the save's start
    t0 = write_log(b, dated_now(text[:save] + b"ATTEMPT #2 seed=44 RESUME from /runs/sft/ckpt\n"
                   b"[rank0]:[titan] 2026-05-10 21:25:06,000 - root - INFO - Loading the "
                   b"checkpoint at step 8.\n"))
    b.step()
    b.step(t0 + 10)
    (firing,) = b.notes()
    assert firing["kind"] == "firing" and firing["facts"]["checkpoint"] is None
    assert firing["facts"]["summary"].startswith("no new line for 10 s (budget 5 s")
