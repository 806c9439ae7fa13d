"""llm.c's main.log as v1 rows (app/ingest/formats/llmc.py): the real GPT-2 124M log in
../shared/realdata, and hand-written lines."""

from __future__ import annotations

import math
import statistics

import pytest

from app.ingest.formats import EVAL, TRAIN, llmc
from tests.conftest import SHARED, needs_realdata

MAIN_LOG = SHARED / "realdata" / "llmc-gpt2-124m" / "main.log"


@pytest.fixture(scope="module")
def real():
    data = MAIN_LOG.read_bytes()
    records, problems = llmc.parse(data, 0)
    return data, records, problems


@needs_realdata
def test_the_real_log_has_19552_training_rows_and_its_validation_apart(real):
    _, records, problems = real
    assert problems == []
    train = [r for r in records if r.kind == TRAIN]
    assert [r.data["step"] for r in train] == list(range(19552))
    assert {tuple(r.data) for r in train} == {("step", "loss", "lr", "grad_norm")}
    evals = [r for r in records if r.kind == EVAL]
    val = [r.data["step"] for r in evals if "val_loss" in r.data]
    hellaswag = [r.data["step"] for r in evals if "eval_accuracy" in r.data]
    assert val == [*range(0, 19552, 250), 19552]  # every 250 steps, and after the last
    assert len(hellaswag) == 79 and hellaswag[-1] == 19552
    assert evals[-1].data == {"step": 19552, "eval_accuracy": 0.3054}


@needs_realdata
def test_the_grad_norm_spike_at_8715(real):
    data, records, _ = real
    norms = {r.data["step"]: r.data["grad_norm"] for r in records if r.kind == TRAIN}
    assert norms[8715] == 4.29
    around = [norms[s] for s in range(8215, 9216) if s != 8715]
    assert 0.2 < statistics.median(around) < 0.4  # "~0.3"
    assert max(around) < 1.5
    spike = next(r for r in records if r.data["step"] == 8715 and r.kind == TRAIN)
    assert data[spike.offset:].startswith(b"s:8715 trl:3.5416 lr:0.000370 norm:4.29\n")


def test_other_line_shapes_are_skipped_silently_and_offsets_count_them():
    lines = [b"+-----------------------+----------------------------------------------------+\n",
             b"| Parameter             | Value                                              |\n",
             b"num_parameters: 124475904 => bytes: 248951808\n",
             b"s:0 tel:11.0095\n",
             b"step    1/19552 | train loss 11.011 | norm 14.96 | lr 1.00e-06 | (237.63 ms)\n",
             b"s:1 trl:10.9586 lr:0.000002 norm:15.18 dt:237.63 tok/s:2206\r\n",
             b"s:2 trl:nan lr:0.000003 norm:inf\n",
             b"s:3 trl:oops lr:0.000003 norm:1.0\n",
             b"s:4 trl:9.0"]  # no newline yet: read next time
    at = [sum(map(len, lines[:i])) for i in range(len(lines))]
    records, problems = llmc.parse(b"".join(lines), 100)
    assert [(r.offset - 100, r.kind) for r in records] == [
        (at[3], EVAL), (at[5], TRAIN), (at[6], TRAIN), (at[7], TRAIN)]
    assert records[0].data == {"step": 0, "val_loss": 11.0095}
    assert records[1].data == {"step": 1, "loss": 10.9586, "lr": 0.000002, "grad_norm": 15.18,
                               "dt": 237.63, "tok_per_sec": 2206.0}
    assert math.isnan(records[2].data["loss"]) and records[2].data["grad_norm"] == math.inf
    assert records[3].data["loss"] is None
    assert [(p.offset - 100, p.severity) for p in problems] == [(at[7], "warning")]
    assert "trl:oops" in problems[0].reason


@pytest.mark.parametrize(("head", "expected"), [
    (b"s:0 tel:11.0095\ns:0 trl:11.0116 lr:0.000001 norm:14.96\n", True),
    (b"banner\n" * 5 + b"s:0 trl:11.0116 lr:0.000001 norm:14.96\n", True),
    (b"s:19552 eval:0.3054\n", True),
    (b"s:0 tel:11.0095", False),  # no whole line yet
    (b"step 0, loss: 10.9\n", False),
    (b"hello\nworld\n", False),
    (b"", False),
])
def test_sniff(head, expected):
    assert llmc.sniff(head) is expected


@needs_realdata
def test_sniff_reads_the_real_log_from_its_first_bytes():
    with MAIN_LOG.open("rb") as file:
        assert llmc.sniff(file.read(4096))
