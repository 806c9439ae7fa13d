"""TensorBoard event files read in bulk (app/ingest/formats/tfbulk.py, tfrecord.scan): on
files large enough for templates, every row, value and problem is the one the protobuf
library reads record by record; the float32 shown is the same shortest decimal str() gives.
The small files of test_formats_tfevents.py go the careful way; these go the bulk way."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.proto.tensor_pb2 import TensorProto

from app.ingest.formats import EVAL, TRAIN, tfbulk, tfevents, tfrecord
from tests.app.test_formats_tfevents import SCALARS, corrupt, event_file

STEPS = [*range(1, 400), *range(16_380, 16_390)]  # the step's varint grows: 1, 2, 3 bytes


def careful(data: bytes) -> list[tuple[int, str, dict]]:
    """The rows as the protobuf library reads each record, one row per step and kind (these
    files' steps rise and repeat no tag), both at the step's latest wall time."""
    rows: dict[tuple[int, str], dict] = {}
    firsts: dict[int, int] = {}
    times: dict[int, float] = {}
    for offset, body in tfrecord.read(data, 0)[0]:
        event = tfevents.Event.FromString(body)
        for value in event.summary.value:
            if (number := tfevents.scalar(value)) is None:
                continue
            firsts.setdefault(event.step, offset)
            times[event.step] = max(times.get(event.step, 0.0), event.wall_time)
            kind = EVAL if value.tag.startswith("eval/") else TRAIN
            rows.setdefault((event.step, kind), {"step": event.step, "time": 0.0})[
                value.tag] = number
    for (step, _), row in rows.items():
        row["time"] = times[step]
    return [(firsts[step], kind, row) for (step, kind), row in rows.items()]


def write(folder, *, tensors: bool = False) -> bytes:
    writer = SummaryWriter(str(folder))
    for step in STEPS:
        writer.add_scalar("loss", 1.0 / step, step)
        writer.add_scalar("lr", 3e-4 if step < 200 else 0.1, step)
        writer.add_scalar("grad_norm", 0.5 + step / 7, step)
        if step % 50 == 0:
            writer.add_scalar("eval/loss", 2.0 / step, step)
            writer.add_histogram("weights", [1.0, 2.0, float(step)], step)
        if tensors and step % 3 == 0:  # as torch's new_style=True writes a scalar
            tensor = TensorProto(dtype="DT_FLOAT", float_val=[step / 3])
            writer.file_writer.add_summary(Summary(value=[Summary.Value(
                tag="new_style", tensor=tensor, metadata=SCALARS)]), step)
    writer.close()
    return event_file(folder).read_bytes()


def rows(records) -> list[tuple[int, str, dict]]:
    return [(r.offset, r.kind, r.data) for r in records]


def test_a_large_file_read_in_bulk_is_the_file_read_record_by_record(tmp_path):
    data = write(tmp_path)
    records, problems, consumed = tfevents.parse(data, 0, final=True)
    assert problems == [] and consumed == len(data)
    assert rows(records) == careful(data)
    assert len(records) == len(STEPS) + len([s for s in STEPS if s % 50 == 0])
    assert records[0].data["lr"] == 0.0003 and records[-1].data["lr"] == 0.1  # as written


def test_tensor_scalars_among_bulk_ones_keep_their_place(tmp_path):
    data = write(tmp_path, tensors=True)
    records, problems, _ = tfevents.parse(data, 0, final=True)
    assert problems == [] and rows(records) == careful(data)
    assert next(r for r in records if r.data["step"] == 9).data["new_style"] == 3.0


@pytest.mark.parametrize("where", ["data", "length"])
def test_a_corrupt_record_among_thousands_is_skipped_with_its_offset(tmp_path, where):
    data = write(tmp_path)
    offsets = [offset for offset, _ in tfrecord.read(data, 0)[0]]
    bad = offsets[700]  # in the middle of records that take the bulk way
    broken = corrupt(data, bad + (14 if where == "data" else 2))
    records, problems, consumed = tfevents.parse(broken, 0, final=True)
    assert [(p.offset, p.severity) for p in problems] == [(bad, "error")]
    assert f"{where} checksum" in problems[0].reason and consumed == len(data)
    want = [(o, k, {key: v for key, v in row.items()}) for o, k, row in careful(data)]
    lost = tfevents.Event.FromString(dict(tfrecord.read(data, 0)[0])[bad])
    (tag,) = [value.tag for value in lost.summary.value]
    for _, _, row in want:
        if row["step"] == lost.step:
            row.pop(tag)
    assert rows(records) == [(o, k, row) for o, k, row in want if len(row) > 2]


def test_read_in_pieces_the_bulk_way_gives_each_row_once(tmp_path):
    data = write(tmp_path)
    whole = rows(tfevents.parse(data, 0, final=True)[0])
    pos, got = 0, []
    for end in range(40_000, len(data) + 40_000, 40_000):
        records, problems, consumed = tfevents.parse(data[pos:end], pos)
        assert problems == []
        got += rows(records)
        pos += consumed
    got += rows(tfevents.parse(data[pos:], pos, final=True)[0])
    assert got == whole


def test_records_of_alternating_lengths_are_framed_where_they_are(tmp_path):
    """One Event a scalar: three lengths in turn, the pattern the framing predicts from."""
    data = write(tmp_path)
    starts, lengths, problems, consumed = tfrecord.scan(data, 0)
    pos, walked = 0, []
    while pos < len(data):
        walked.append(pos)
        pos += 16 + struct.unpack_from("<Q", data, pos)[0]
    assert starts.tolist() == walked and consumed == len(data) and problems == []
    assert len(set(lengths.tolist())) > 3


def shortest(values: np.ndarray) -> list[float]:
    return [float(str(v)) for v in values.astype(np.float32)]


@pytest.mark.parametrize("seed", range(3))
def test_float32_values_show_as_the_shortest_decimal_str_gives(seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate([
        rng.integers(0, 2**32, 40_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        rng.random(20_000).astype(np.float32), (rng.random(20_000) * 1e-7).astype(np.float32),
        (np.arange(1, 20_000) * 0.001).astype(np.float32),
        np.array([0.1, 3e-4, 1.0, 0.5, 16777217.0, 1e-12, 1e12, 9.999999e11, 1e-13, 0, -0.0,
                  np.inf, -np.inf, np.nan, 3.4e38, 1e-45, 123456789.0, 1e8, 1e9], np.float32)])
    got = tfbulk.singles(values[:, None])[:, 0]
    want = np.array(shortest(values))
    assert ((got == want) | (np.isnan(got) & np.isnan(want))).all()


def test_the_complete_part_read_again_is_the_same_and_other_bytes_are_read_afresh(tmp_path):
    """tail.py asks how much is complete, then careful.py reads that much (final): the
    answer kept between them is given only for those very bytes."""
    data = write(tmp_path)
    records, _, consumed = tfevents.parse(data, 0)
    assert consumed < len(data)  # the last step waits
    again, problems, _ = tfevents.parse(data[:consumed], 0, final=True)
    assert rows(again) == rows(records) and problems == []
    other = corrupt(data, 2000)[:consumed]  # the same length and base, another byte
    tfevents.parse(data, 0)
    fresh, problems, _ = tfevents.parse(other, 0, final=True)
    assert [p.offset for p in problems] and rows(fresh) != rows(records)
