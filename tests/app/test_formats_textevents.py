"""Events that text logs write in words (app/ingest/formats/textevents.py, read by textlog.py):
each trainer's save and resume lines on small fixtures in its own wording
(tests/data/textlog/events_*), lines that look like them but say nothing happened, and the
real logs of ../shared/realdata through `ingest --once` and `diagnose`: the saves the logs
state are checkpoint events, and the stalls and spikes right after them name `checkpoint`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from app.ingest.formats import EVENT, textlog
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED, needs_realdata, run_cli

DATA = Path(__file__).parents[1] / "data" / "textlog"
KEYS = ("step", "blocked_s", "from_step", "path", "checkpoint", "attempt", "epoch", "load_s")
RUN = ("run_start", "run_end")  # a launch and the end of training: test_formats_textends.py


def events(data: bytes, after: int | None = None) -> list[tuple]:
    """(kind, {key: value}) of each event ``data`` gives, in order: the facts only."""
    records, problems = textlog.parse(data, 0, after=after)
    assert problems == []
    found = [r.data for r in records if r.kind == EVENT and r.data["event"] not in RUN]
    for event in found:  # every event a log states is logged, and names its line
        assert event["inferred"] is False and event["source"].startswith("log line '")
    return [(e["event"], {k: e[k] for k in KEYS if k in e}) for e in found]


CASES = {
    # the wrapper's ATTEMPT line, the load, its time and the first step are one resume; a
    # save's start and end take the step logged before them, or the one its start names (the
    # last step, 5514, logged as 5510/5514); a save with no end line has none
    "events_torchtitan.log": [
        ("resume", {"step": 5500, "from_step": 5500, "attempt": 2, "load_s": 4.22,
                    "checkpoint": "/runs/sft/ckpt/checkpoint/step-5500"}),
        ("checkpoint_start", {"step": 5503}),
        ("checkpoint_end", {"step": 5503, "blocked_s": 20.72}),
        ("checkpoint_start", {"step": 5504}),
        ("checkpoint_start", {"step": 5514}),
        ("checkpoint_end", {"step": 5514, "blocked_s": 5.53})],
    # Megatron-LM (core): the load, the save's two lines and its timer block in ms
    "events_megatron_lm.log": [
        ("resume", {"step": 40, "from_step": 40, "checkpoint": "/ckpt/llama1b"}),
        ("checkpoint_start", {"step": 50, "path": "/ckpt/llama1b"}),
        ("checkpoint_end", {"step": 50, "blocked_s": 17.92559, "path": "/ckpt/llama1b"}),
        ("checkpoint_end", {"step": 52, "blocked_s": 1.06341})],
    # Megatron-DeepSpeed: DeepSpeed's own "[Rank 0] Saving model checkpoint:" line, "successfully
    # saved ... at iteration", its Latency(second) line, and the older one-line timers
    # ("time (ms) | ... | save-checkpoint: N", as BigScience's tr1-13B log has them)
    "events_megatron_ds.log": [
        ("checkpoint_start", {"step": 100, "path": "/home/sd/checkpoints/qwen7b/global_step100/"
                                                   "mp_rank_00_model_states.pt"}),
        ("checkpoint_end", {"step": 100, "blocked_s": 23.684,
                            "path": "/home/sd/checkpoints/qwen7b"}),
        ("checkpoint_end", {"step": 101, "blocked_s": 21.0123})],
    # nanoGPT saves after its eval line, before "iter 1000": the last training step is 990;
    # the pasted source line above it is no save
    "events_nanogpt.log": [("checkpoint_end", {"step": 990, "path": "out"})],
    # llm.c's stdout: the model file and the state file of one save, at the step they name
    "events_llmc.log": [("checkpoint_end", {"step": 5000,
                                            "path": "log124M/model_00005000.bin"})],
    # the Trainer's INFO line after a tqdm bar, and under another logger's prefix: two saves
    # (the same wording twice is two saves), at the printed dicts' count
    "events_hf_trainer.txt": [("checkpoint_end", {"step": 2, "path": "out/checkpoint-2"}),
                              ("checkpoint_end", {"step": 2, "path": "out/checkpoint-4"})],
    # Lightning's ModelCheckpoint(verbose=True) names its own epoch and global step
    "events_lightning.log": [
        ("checkpoint_end", {"step": 50, "epoch": 0,
                            "path": "/runs/yolo/checkpoints/epoch=0-step=50.ckpt"}),
        ("checkpoint_end", {"step": 150, "epoch": 2,
                            "path": "/runs/yolo/checkpoints/epoch=2-step=150.ckpt"})],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_trainers_wording_is_its_events(name):
    assert events((DATA / name).read_bytes()) == CASES[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_event_lines_leave_the_training_rows_as_they_were(name):
    """The same rows with the event lines taken out: an event line is never a row."""
    data = (DATA / name).read_bytes()
    records, _ = textlog.parse(data, 0)
    offsets = {r.offset for r in records if r.kind == EVENT}
    assert offsets
    kept, at = [], 0
    for line in data.split(b"\n")[:-1]:
        if not any(at <= o <= at + len(line) for o in offsets):
            kept.append(line)
        at += len(line) + 1
    without, _ = textlog.parse(b"\n".join(kept) + b"\n", 0)
    assert ([r.data for r in records if r.kind != EVENT]
            == [r.data for r in without if r.kind != EVENT])


def test_the_source_quotes_the_line_and_its_byte():
    line = (b"[rank0]:[titan] 2026-05-10 21:06:39,172 - root - INFO - Finished saving the "
            b"checkpoint (or staging if async is enabled) in 17.46 seconds.\n")
    records, _ = textlog.parse(b"x\n" + line, 81232, after=7000)
    assert [r.offset for r in records] == [81234]
    assert records[0].data == {
        "event": "checkpoint_end", "step": 7000, "blocked_s": 17.46, "inferred": False,
        "source": "log line 'Finished saving the checkpoint (or staging if async is enabled) "
                  "in 17.46 seconds.' (byte 81234)", "time": records[0].data["time"]}


def test_a_save_first_in_a_read_takes_the_step_stored_before_it():
    assert events(b"saving checkpoint to out\n", after=990) == [
        ("checkpoint_end", {"step": 990, "path": "out"})]


def test_training_starts_at_a_later_step_is_a_resume_and_no_row():
    records, _ = textlog.parse(b"Training starts at step 6501\n", 0, after=5)
    assert [r.kind for r in records] == [EVENT, EVENT]  # its launch's run_start, the resume
    assert events(b"Training starts at step 6501\n") == [
        ("resume", {"step": 6500, "from_step": 6500})]


@pytest.mark.parametrize("line", [
    # pasted source: a format string, not a path
    b'        logger.info(f"Saving model checkpoint to {output_dir}")',
    b'            print(f"saving checkpoint to {out_dir}")',
    b'        logger.info("Saving the checkpoint (or staging if async is enabled).")',
    b"    print_rank_0('saving checkpoint at iteration {:7d} to {}'.format(iteration, save))",
    # no resume: a fresh start, a seed checkpoint (step 0), a load's time with no load
    b"Training starts at step 1, with local batch size 8, global batch size 64",
    b"Loading the checkpoint from /runs/x/checkpoint/step-0.",
    b"Finished loading the checkpoint in 4.22 seconds.",
    # about checkpoints, but no save or load
    b"Checkpointer is deleting /runs/x/checkpoint/step-4000.",
    b"Checkpointing active. Checkpoints will be loaded from and saved to /runs/x/checkpoint",
    b"activation_checkpoint.mode=full ignored",
    b"    save_interval ................................... 50",
    b"[INFO|configuration_utils.py:471] 2024-05-01 12:00:02,510 >> Configuration saved in o/c.json",
])
def test_lines_that_say_no_save_or_resume_happened(line):
    """Each such line before a real save: only the save is an event, and nothing a row."""
    records, problems = textlog.parse(line + b"\nsaving checkpoint to out\n", 0, after=5)
    assert problems == [] and [(r.offset, r.kind) for r in records
                               if r.data.get("event") != "run_start"] == [(len(line) + 1, EVENT)]


def test_event_lines_alone_do_not_make_a_file_a_log():
    """A text file of nothing but save lines is no training log (detect.py asks sniff)."""
    only = b"".join((DATA / name).read_bytes() for name in CASES)
    lines = [x for x in only.split(b"\n") if textlog.parse(x + b"\n", 0)[0]
             and all(r.kind == EVENT for r in textlog.parse(x + b"\n", 0)[0])]
    assert len(lines) >= 15
    assert not textlog.sniff(b"\n".join(lines) + b"\n")


def test_through_the_tailer_the_events_are_stored_with_their_step(tmp_path):
    run = tmp_path / "logs" / "titan"
    run.mkdir(parents=True)
    shutil.copy(DATA / "events_torchtitan.log", run / "train.log")
    with ingest(tmp_path / "logs") as mon:
        got = query(mon, "SELECT kind, step, data->>'blocked_s', data->>'inferred' FROM events "
                         "WHERE run = 'titan' AND kind NOT IN ('run_start', 'run_end') "
                         "ORDER BY \"offset\"")
        rows = query(mon, "SELECT count(*) FROM metrics_all WHERE run = 'titan'")
    assert got == [("resume", 5500, None, "false"), ("checkpoint_start", 5503, None, "false"),
                   ("checkpoint_end", 5503, "20.72", "false"),
                   ("checkpoint_start", 5504, None, "false"),
                   ("checkpoint_start", 5514, None, "false"),
                   ("checkpoint_end", 5514, "5.53", "false")]
    assert rows == [(5,)]


# --- the real logs (../shared/realdata) ------------------------------------------------------

REAL = ("torchtitan-crash-resume", "torchtitan-vlm-447m", "megatron-lm-llama1b-killed")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The three logs that state their saves, through `ingest --once` and `diagnose --json`."""
    logs = tmp_path_factory.mktemp("textevents") / "logs"
    for name in REAL:
        shutil.copytree(SHARED / "realdata" / name, logs / name)
    done = run_cli("ingest", "--logdir", str(logs), "--once", timeout=300)
    assert done.returncode == 0, done.stderr
    diagnosed = run_cli("diagnose", str(logs), "--json", timeout=300)
    found = json.loads(diagnosed.stdout)
    db = duckdb.connect(str(logs / ".cliffwatch" / "cliffwatch.duckdb"), read_only=True)
    try:
        ends = db.execute("SELECT run, step, TRY_CAST(data->>'blocked_s' AS DOUBLE) FROM events "
                          "WHERE kind = 'checkpoint_end' ORDER BY run, step").fetchall()
    finally:
        db.close()
    return {"ends": ends, "incidents": found["incidents"] if isinstance(found, dict) else found}


@needs_realdata
@pytest.mark.parametrize(("name", "saves"), [
    # "Finished saving the checkpoint (or staging if async is enabled) in 20.72 seconds."
    ("torchtitan-crash-resume", [(5500, 20.72), (6000, 46.02), (6500, 91.66)]),
    ("torchtitan-vlm-447m", [(7000, 17.46)]),
    # Megatron's timer block: save-checkpoint (min, max) in ms, the first save 17.9 s
    ("megatron-lm-llama1b-killed", [(50, 17.92559), (100, 1.06341), (150, 1.01798),
                                    (200, 1.11889), (250, 1.09802), (300, 1.09203)]),
])
def test_the_saves_the_real_logs_state_are_checkpoint_ends(real, name, saves):
    assert [(step, blocked) for run, step, blocked in real["ends"] if run == name] == saves


@needs_realdata
@pytest.mark.parametrize(("name", "kind", "step"), [
    ("torchtitan-crash-resume", "spike", 5501), ("torchtitan-crash-resume", "spike", 6001),
    ("torchtitan-crash-resume", "spike", 6501), ("torchtitan-crash-resume", "stall", 5501),
    ("torchtitan-crash-resume", "stall", 6001), ("torchtitan-crash-resume", "stall", 6501),
    ("torchtitan-vlm-447m", "stall", 7001), ("megatron-lm-llama1b-killed", "stall", 51),
])
def test_a_stall_or_spike_right_after_a_stated_save_is_the_checkpoints(real, name, kind, step):
    got = [i for i in real["incidents"]
           if (i["run"], i["kind"], i["step"]) == (name, kind, step)]
    assert len(got) == 1, [(i["run"], i["kind"], i["step"]) for i in real["incidents"]]
    assert got[0]["causes"][0] == "checkpoint", got[0]
    assert f"checkpoint at step {step - 1}" in got[0]["evidence"][0], got[0]
