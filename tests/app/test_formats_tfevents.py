"""TensorBoard event files as v1 rows (app/ingest/formats/tfevents.py, tfrecord.py), on files
written by the real tensorboardX SummaryWriter: scalars old and new style, a file read as it
grows, a record cut short, checksums that fail."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.proto.tensor_pb2 import TensorProto

from app.ingest.formats import EVAL, TRAIN, tfevents, tfrecord
from tests.conftest import ROOT, wait_for

SCALARS = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))


def event_file(folder: Path) -> Path:
    (path,) = folder.glob("events.out.tfevents.*")
    return path


def write_steps(writer: SummaryWriter, steps) -> None:
    for step in steps:
        writer.add_scalar("loss", 1.0 / step, step)
        writer.add_scalar("lr", 0.1, step)
        writer.add_scalar("eval/loss", 2.0 / step, step)


def written(writer: SummaryWriter, folder: Path, records: int) -> bytes:
    """The file once it holds ``records`` records: tensorboardX's flush() writes out only
    what its writer thread has taken from the queue so far."""
    def data():
        writer.flush()
        paths = list(folder.glob("events.out.tfevents.*"))
        data = paths[0].read_bytes() if paths else b""
        return data if len(frames(data)) >= records else None
    return wait_for(data)


def read_all(data: bytes) -> list:
    records, problems, consumed = tfevents.parse(data, 0, final=True)
    assert problems == [] and consumed == len(data)
    return records


def test_scalars_become_rows_by_step_with_eval_tags_apart(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    write_steps(writer, [1, 2, 3])
    writer.add_histogram("weights", [1.0, 2.0, 3.0], 3)
    writer.add_text("note", "hello", 3)
    writer.close()
    records = read_all(event_file(tmp_path).read_bytes())
    assert [(r.kind, r.data["step"]) for r in records] == [
        (TRAIN, 1), (EVAL, 1), (TRAIN, 2), (EVAL, 2), (TRAIN, 3), (EVAL, 3)]
    assert {k: v for k, v in records[4].data.items() if k != "time"} == {
        "step": 3, "loss": 0.33333334, "lr": 0.1}  # float32 shown as written
    assert records[5].data["eval/loss"] == pytest.approx(2 / 3)
    times = [r.data["time"] for r in records]
    assert times == sorted(times) and 1.6e9 < times[0] < 4e9  # the writer's wall time


def test_tensor_encoded_scalars_are_read(tmp_path):
    """torch's SummaryWriter with new_style=True and TF2 write a one-element tensor, not a
    simple_value (float_val, or raw tensor_content)."""
    writer = SummaryWriter(str(tmp_path))
    tensors = {"f32": TensorProto(dtype="DT_FLOAT", float_val=[0.25]),
               "f64": TensorProto(dtype="DT_DOUBLE", double_val=[0.125]),
               "raw": TensorProto(dtype="DT_FLOAT", tensor_content=struct.pack("<f", 1.5)),
               "raw64": TensorProto(dtype="DT_DOUBLE", tensor_content=struct.pack("<d", 2.5)),
               "half": TensorProto(dtype="DT_HALF", half_val=[0x3C00]),  # 1.0
               "i64": TensorProto(dtype="DT_INT64", int64_val=[7])}
    for tag, tensor in tensors.items():
        writer.file_writer.add_summary(
            Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=SCALARS)]), 4)
    vector = TensorProto(dtype="DT_FLOAT", float_val=[1.0, 2.0],
                         tensor_shape={"dim": [{"size": 2}]})
    writer.file_writer.add_summary(Summary(value=[Summary.Value(tag="vector", tensor=vector,
                                                                metadata=SCALARS)]), 4)
    writer.close()
    (record,) = read_all(event_file(tmp_path).read_bytes())
    assert {k: v for k, v in record.data.items() if k != "time"} == {
        "step": 4, "f32": 0.25, "f64": 0.125, "raw": 1.5, "raw64": 2.5, "half": 1.0, "i64": 7.0}


def test_the_last_step_waits_for_the_next_one_unless_final(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    write_steps(writer, [1, 2])
    data = written(writer, tmp_path, 7)  # file_version and 3 scalars a step
    records, _, consumed = tfevents.parse(data, 0)
    assert [r.data["step"] for r in records] == [1, 1]
    assert consumed < len(data)  # step 2 is read again next time, with what follows
    write_steps(writer, [3])
    writer.close()
    data = event_file(tmp_path).read_bytes()
    later, _, _ = tfevents.parse(data[consumed:], consumed, final=True)
    assert [(r.kind, r.data["step"]) for r in later] == [(TRAIN, 2), (EVAL, 2), (TRAIN, 3),
                                                         (EVAL, 3)]
    assert later[0].data["loss"] == 0.5 and later[0].data["lr"] == 0.1  # step 2 whole


def test_a_file_read_in_pieces_of_any_size_gives_each_row_once(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    write_steps(writer, range(1, 6))
    writer.close()
    data = event_file(tmp_path).read_bytes()
    whole = read_all(data)
    for size in (1, 7, 12, 13, 50, 333):
        pos, got = 0, []
        for end in range(size, len(data) + size, size):
            records, problems, consumed = tfevents.parse(data[pos:end], pos)
            assert problems == []
            got += records
            pos += consumed
        records, _, consumed = tfevents.parse(data[pos:], pos, final=True)
        assert pos + consumed == len(data)
        assert [(r.offset, r.kind, r.data) for r in got + records] == [
            (r.offset, r.kind, r.data) for r in whole]


def test_a_live_writer_new_scalars_show_after_each_flush(tmp_path):
    writer = SummaryWriter(str(tmp_path), flush_secs=3600)
    pos, steps = 0, []
    for step in range(1, 4):
        writer.add_scalar("loss", 1.0 / step, step)
        data = written(writer, tmp_path, 1 + step)
        records, _, consumed = tfevents.parse(data[pos:], pos, final=True)  # stopped growing
        pos += consumed
        steps += [r.data["step"] for r in records]
        assert steps == list(range(1, step + 1))
    writer.close()


def corrupt(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def frames(data: bytes) -> list[int]:
    return [offset for offset, _ in tfrecord.read(data, 0)[0]]


def test_a_record_whose_data_checksum_fails_is_skipped_with_its_offset(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    write_steps(writer, [1, 2, 3])
    writer.close()
    data = event_file(tmp_path).read_bytes()
    offsets = frames(data)
    bad = offsets[4]  # file_version, then 3 events a step: the loss of step 2
    records, problems, consumed = tfevents.parse(corrupt(data, bad + 14), 0, final=True)
    assert [(p.offset, p.severity) for p in problems] == [(bad, "error")]
    assert "data checksum" in problems[0].reason
    assert consumed == len(data)
    step2 = next(r.data for r in records if r.data["step"] == 2 and r.kind == TRAIN)
    assert "loss" not in step2 and step2["lr"] == 0.1
    assert [r.data["step"] for r in records if r.kind == TRAIN] == [1, 2, 3]


def test_a_length_whose_checksum_fails_resyncs_to_the_next_record(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    write_steps(writer, [1, 2, 3])
    writer.close()
    data = event_file(tmp_path).read_bytes()
    offsets = frames(data)
    bad = offsets[4]
    records, problems, consumed = tfevents.parse(corrupt(data, bad + 2), 0, final=True)
    assert [(p.offset, p.severity) for p in problems] == [(bad, "error")]
    assert "length checksum" in problems[0].reason
    assert consumed == len(data)
    assert [r.data["step"] for r in records if r.kind == TRAIN] == [1, 2, 3]


def test_a_record_cut_short_waits_and_a_short_tail_of_garbage_too():
    body = b"\x09" + struct.pack("<d", 1.0) + b"\x10\x05"  # wall_time 1.0, step 5
    record = struct.pack("<Q", len(body))
    record += struct.pack("<I", tfrecord.masked_crc(record)) + body
    record += struct.pack("<I", tfrecord.masked_crc(body))
    for cut in range(len(record)):
        assert tfrecord.read(record[:cut], 0) == ([], [], 0)
    assert tfrecord.read(record, 40) == ([(40, body)], [], len(record))
    garbage = b"\x00" * 20
    _, problems, consumed = tfrecord.read(garbage, 0)
    assert [p.offset for p in problems] == [0] and consumed == 9  # 11 bytes may start one


def test_a_record_that_is_no_event_is_a_problem():
    body = b"\xff\xff\xff"
    record = struct.pack("<Q", len(body))
    record += struct.pack("<I", tfrecord.masked_crc(record)) + body
    record += struct.pack("<I", tfrecord.masked_crc(body))
    records, problems, consumed = tfevents.parse(record, 0)
    assert records == [] and consumed == len(record)
    assert [(p.offset, p.severity) for p in problems] == [(0, "error")]


def test_tags_named_like_v1_keys_cannot_take_their_place(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    for tag in ("step", "time", "epoch", "loss"):
        writer.add_scalar(tag, 3.0, 10)
    writer.close()
    (record,) = read_all(event_file(tmp_path).read_bytes())
    assert record.data["step"] == 10 and record.data["epoch"] == 3.0
    assert record.data["log_step"] == 3.0 and record.data["log_time"] == 3.0
    assert record.data["time"] > 1e9


def test_reading_event_files_imports_neither_tensorboardx_nor_torch():
    """The decision in docs/formats.md: tensorboardX's messages would import torch (seconds,
    and 200 MB) into the monitor wherever torch is installed."""
    code = ("import sys, app.ingest.formats.tfevents; "
            "print(sorted({'torch', 'tensorboardX', 'tensorboard'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_complete_part_asked_again_is_answered_from_the_last_read_only_if_unchanged(
        tmp_path):
    """The tailer asks how much is complete, then reads exactly that (a copy, data[:end]):
    the second answer is the first one kept, and bytes that differ anywhere are read anew."""
    writer = SummaryWriter(str(tmp_path))
    write_steps(writer, range(1, 1500))
    writer.close()
    data = event_file(tmp_path).read_bytes()
    first = tfevents.read(data, 0)
    complete = data[:first.consumed]
    assert tfevents.read(complete, 0, final=True) is first
    tfevents.read(data, 0)
    changed = corrupt(complete, frames(complete)[-5] + 14)
    again = tfevents.read(changed, 0, final=True)
    assert again is not first and [p.offset for p in again.problems] == [frames(complete)[-5]]
    tfevents.read(data, 0)
    shorter = tfevents.read(complete[:-1], 0, final=True)
    assert shorter is not first and shorter.consumed < first.consumed
