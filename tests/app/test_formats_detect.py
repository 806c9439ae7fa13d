"""Which format a file is, and which of two logs of one run is read
(app/ingest/formats/detect.py), on names and first bytes, and on ../shared/realdata."""

from __future__ import annotations

import struct

import pytest

from app.ingest.formats import detect, tfrecord
from app.ingest.formats.detect import (
    CSV,
    EVENTS,
    HF_STATE,
    JSONL,
    METRICS,
    PENDING,
    RANK,
    RUN_META,
    TEXT,
    TFEVENTS,
    choose,
)
from tests.conftest import SHARED, needs_realdata

REALDATA = SHARED / "realdata"


def tfrecord_head() -> bytes:
    length = struct.pack("<Q", 24)
    return length + struct.pack("<I", tfrecord.masked_crc(length)) + b"\x09" * 8


STEP_LINE = b'{"global_step": 1, "loss": 2.0}\n'
PROSE = b"Remember the milk, then the 3 reports.\n"
CONFIG = b"".join(b"n_layer%d = 12 # a config dump line\n" % i for i in range(3000))


@pytest.mark.parametrize(("name", "head", "expected"), [
    ("metrics.jsonl", b"", METRICS),  # v1 names keep their meaning, whatever they hold
    ("metrics.jsonl", b"not json\n", METRICS),
    ("events.jsonl", b"", EVENTS),
    ("rank3.jsonl", b"", RANK),
    ("run.json", b"{}", RUN_META),
    ("train_log.jsonl", STEP_LINE, JSONL),
    ("trainer_log.jsonl", b'{"current_steps": 10, "loss": 2.49}\n', JSONL),
    ("log.jsonl", b'{"config": {"lr": 0.1}}\n' + STEP_LINE, JSONL),  # a header line first
    ("x.metrics.jsonl", b'\xef\xbb\xbf{"step": 1}\r\n', JSONL),
    ("rank.jsonl", b'{"event": "run_start", "step": 0}\n', JSONL),
    ("log.jsonl", b'{"step": 1, "loss"', PENDING),  # no whole line yet
    ("log.jsonl", b"", PENDING),
    ("data.jsonl", b'{"text": "a dataset line", "label": 1}\n', None),
    ("data.jsonl", b"[1, 2, 3]\n", None),
    ("data.jsonl", b"x" * detect.SNIFF_BYTES, None),
    ("trainer_state.json", b'{\n  "best_metric": null,', HF_STATE),
    ("trainer_state.json", b"", PENDING),
    ("trainer_state.json", b"[]", None),
    ("events.out.tfevents.1714564800.host.123.0", tfrecord_head(), TFEVENTS),
    ("events.out.tfevents.1714564800.host.123.0", tfrecord_head()[:11], PENDING),
    ("events.out.tfevents.1714564800.host.123.0", b"x" * 40, None),
    ("main.log", b"s:0 tel:11.0095\ns:0 trl:11.0116 lr:0.000001 norm:14.96\n", TEXT),
    ("train.txt", b"s:5 trl:3.1 lr:0.1 norm:0.2\n", TEXT),
    ("main.log", b"", PENDING),
    # text logs of any trainer (issue 19): a line with a step-like key and a number
    ("train.log", b"iter 100: loss 4.2100, time 35.21ms, mfu 12.30%\n", TEXT),
    ("slurm-4242.out", b"+ srun python train.py\nstep:1/20 train_loss:10.9\n", TEXT),
    ("stdout.txt", b"{'loss': '3.914', 'grad_norm': '1.184', 'epoch': '1.25'}\n", TEXT),
    ("train.log", CONFIG + b"iter 0: loss 10.94, time 14028.64ms\n", TEXT),  # past 64 KiB
    # no such line (yet): decided again as the file grows; a whole sample of none: no log
    ("main.log", b"INFO starting\nINFO epoch 1 loss 2.3\n", PENDING),
    ("README.txt", PROSE * 100, PENDING),
    ("notes.txt", PROSE * (detect.TEXT_SNIFF_BYTES // len(PROSE) + 1), None),
    # tqdm's redraws joined by \r: a first line longer than the JSONL sample is no verdict
    ("stdout.txt", b"\r  1%|          | 1/100 [00:01<01:39,  1.00it/s]" * 2000, PENDING),
    ("config.json", b"{}", None),
    ("model.safetensors", b"\x00" * 40, None),
    ("metrics.csv", b"step,loss\n1,2.0\n", CSV),  # Lightning's CSVLogger
    ("data.csv", b"step,loss\n1,2.0\n", None),
    ("metrics.jsonl.gz", b"\x1f\x8b", None),
])
def test_detect(name, head, expected):
    fmt, reason = detect.detect(name, head)
    assert fmt == expected, reason
    if expected is None:
        assert reason.startswith("not a log: ")


@needs_realdata
def test_the_real_logs_are_each_detected():
    expected = {"hf-mistral-translator/trainer_state.json": HF_STATE,
                "hf-mistral-translator/trainer_log.jsonl": JSONL,
                "slm-training-restarts/metrics.jsonl": METRICS,
                "llmc-gpt2-124m/main.log": TEXT,
                # issue 19: every text log, whichever trainer printed it
                "modded-nanogpt-muon/eb5659d0-fb6a-49e5-a311-f1f89412f726.txt": TEXT,
                "modded-nanogpt-soap/5bdc3988-496c-4232-b4ef-53764cb81c92.txt": TEXT,
                "nanogpt-tinystories/train.log": TEXT,
                "nanogpt-gpt2-wandb/output.log": TEXT,
                "torchtitan-vlm-447m/train.log": TEXT,
                "torchtitan-crash-resume/run_stage2_continuation.log": TEXT,
                "megatron-ds-qwen7b/qwen7b_baseline_500.log": TEXT,
                "megatron-lm-llama1b-killed/stdout.log": TEXT,
                "hf-llama32-sft-quoted/train_log.txt": TEXT,
                "hf-chatglm2-lora-nohup/result_CCKS_ChatGLMv2_lora_epoch25_1e-4.txt": TEXT,
                "lightning-yolov3-csv/metrics.csv": CSV}
    found = {}
    for path in sorted(REALDATA.rglob("*")):
        if path.is_file() and path.name != "README.md":
            with path.open("rb") as file:
                found[path.relative_to(REALDATA).as_posix()] = detect.detect(
                    path.name, file.read(detect.sniff_bytes(path.name)))[0]
    # ../shared/realdata grows; each of these is read
    assert {name: found.get(name) for name in expected} == expected
    assert detect.detect("README.md", b"# Real training logs\n")[0] is None


@needs_realdata
def test_trainer_state_wins_over_llama_factorys_trainer_log():
    names = [p.name for p in (REALDATA / "hf-mistral-translator").iterdir()]
    read, skipped = choose(names)
    assert read == ["trainer_state.json"]
    assert [name for name, _ in skipped] == ["trainer_log.jsonl"]
    assert "log_history" in skipped[0][1]


def test_a_log_already_read_keeps_being_read():
    read, skipped = choose(["trainer_log.jsonl", "trainer_state.json"],
                           current=["trainer_log.jsonl"])
    assert read == ["trainer_log.jsonl"]
    assert skipped == [("trainer_state.json", "trainer_log.jsonl is already read for this "
                                              "run; trainer_state.json would repeat it")]


def test_our_v1_metrics_win_over_other_formats_and_the_rest_of_v1_is_always_read():
    names = ["metrics.jsonl", "events.jsonl", "rank0.jsonl", "rank1.jsonl", "run.json",
             "train_log.jsonl", "trainer_state.json", "trainer_log.jsonl", "main.log",
             "events.out.tfevents.1714564800.host.1.0"]
    read, skipped = choose(names)
    assert read == ["events.jsonl", "metrics.jsonl", "rank0.jsonl", "rank1.jsonl", "run.json"]
    assert sorted(name for name, _ in skipped) == sorted(set(names) - set(read))
    assert all("metrics.jsonl" in why for _, why in skipped)


def test_logs_of_no_known_pair_are_all_read_event_files_in_time_order():
    names = ["events.out.tfevents.1714564900.host.2.0", "events.jsonl", "train_log.jsonl",
             "events.out.tfevents.1714564800.host.1.0", "eval_log.jsonl"]
    read, skipped = choose(names)
    assert skipped == []
    assert read == ["eval_log.jsonl", "events.jsonl", "events.out.tfevents.1714564800.host.1.0",
                    "events.out.tfevents.1714564900.host.2.0", "train_log.jsonl"]
