"""TensorBoard scalars handed to the store as columns (app/ingest/columnar.py) store the same
tables as the records the careful path made of them one by one (careful.from_records): the
same rows, columns, offsets, attempts, evaluation rows and problems, exactly once, on event
files written by the real tensorboardX SummaryWriter (train and eval tags, histograms, tensor
scalars, a resume, tags named like v1 keys, a corrupt record), grown in random pieces."""

from __future__ import annotations

import os
import random
import struct
import time
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.proto.tensor_pb2 import TensorProto

from app.ingest import careful, columnar
from app.ingest import settle as settle_module
from app.ingest.formats import tfevents, tfrecord
from tests.app import test_formats_tfevents_bulk as bulk
from tests.app.test_formats_tfevents import SCALARS, corrupt, event_file, frames
from tests.app.test_ingest_both_paths import tables, tailer

REALDATA = Path(__file__).resolve().parents[2].parent / "shared" / "realdata"
DATA = Path(__file__).resolve().parents[1] / "data"


def write(folder: Path, steps, *, tags=("loss", "lr", "grad_norm")) -> bytes:
    writer = SummaryWriter(str(folder))
    for step in steps:
        for number, tag in enumerate(tags):
            writer.add_scalar(tag, (number + 1) / (step + 1), step)
        if step % 50 == 0:
            writer.add_scalar("eval/loss", 2.0 / (step + 1), step)
            writer.add_histogram("weights", [1.0, 2.0, float(step)], step)
        if step % 7 == 0:  # as torch's new_style=True writes a scalar
            tensor = TensorProto(dtype="DT_FLOAT", float_val=[step / 7])
            writer.file_writer.add_summary(Summary(value=[Summary.Value(
                tag="new_style", tensor=tensor, metadata=SCALARS)]), step)
    writer.close()
    return event_file(folder).read_bytes()


def runs(logs: Path) -> dict[str, bytes]:
    """Each run's event file: a resumed one with tags named like v1's keys and a corrupt
    record; one whose keys share a column (Loss, loss), which the columns decline; one in
    the evaluation tags alone."""
    resumed = write(logs / "a", [*range(0, 1500), *range(900, 1200)],
                    tags=("loss", "step", "run", "epoch", "lr"))
    resumed = corrupt(resumed, frames(resumed)[700] + 20)
    return {"a": resumed,
            "b": write(logs / "b", range(0, 300), tags=("Loss", "loss", "grad_norm")),
            "c": write(logs / "c", range(0, 400), tags=("eval/acc",))}


def grown(tmp_path: Path, files: dict[str, bytes], ways, monkeypatch) -> dict:
    """Each way's tables once the files have grown in random pieces (cut anywhere, a record
    too), each way's tailer catching up after every piece, and once they have settled. While
    they grow no file settles (a slow tick would store a held step early for one way only)."""
    logs = tmp_path / "logs"
    paths = {run: logs / run / "events.out.tfevents.1700000000.host" for run in files}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    tailers = {way: tailer(tmp_path, logs, way, True) for way in ways}
    with monkeypatch.context() as patch:
        patch.setattr(settle_module, "SETTLE_S", 1e9)
        for run, piece in pieces(files):
            with paths[run].open("ab") as handle:
                handle.write(piece)
            for way, tail in tailers.items():
                ways[way](tail.catch_up)
    an_hour_ago = time.time() - 3600  # settled: the last step is read too
    for path in paths.values():
        os.utime(path, (an_hour_ago, an_hour_ago))
    for way, tail in tailers.items():
        ways[way](tail.catch_up)
    stored = {way: tables(tail.db) | evals(tail.db) for way, tail in tailers.items()}
    for tail in tailers.values():
        tail.db.close()
    return stored


def pieces(files: dict[str, bytes]):
    """``(run, bytes)``: the files in random pieces, the runs' pieces interleaved (seeded)."""
    rng = random.Random(7)
    at = dict.fromkeys(files, 0)
    while live := [run for run in files if at[run] < len(files[run])]:
        run = rng.choice(live)
        size = rng.choice([rng.randint(1, 300), rng.randint(20_000, 200_000)])
        yield run, files[run][at[run]:at[run] + size]
        at[run] += size


def evals(db) -> dict[str, list]:
    cur = db.cursor()
    columns = sorted(r[0] for r in cur.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'eval_rows' "
        "AND column_name NOT IN ('ingested_at')").fetchall())
    quoted = ", ".join(f'"{c}"' for c in columns)
    return {"eval columns": columns,
            "evals": cur.execute(f"SELECT {quoted} FROM eval_rows ORDER BY rowid").fetchall()}


def test_columns_store_the_tables_the_records_stored(tmp_path, monkeypatch):
    files = runs(tmp_path / "written")
    handed: list[bool] = []
    parsed = columnar.parsed

    def counted(got, first):
        made = parsed(got, first)
        handed.append(made is not None and made.rows is not None)
        return made

    def as_columns(catch_up):
        with monkeypatch.context() as patch:
            patch.setattr(columnar, "parsed", counted)
            catch_up()

    def as_records(catch_up):  # the careful path's records: what columnar.parsed declines
        with monkeypatch.context() as patch:
            patch.setattr(columnar, "parsed", lambda got, first: None)
            catch_up()

    stored = grown(tmp_path, files, {"columns": as_columns, "records": as_records},
                   monkeypatch)
    for table, expected in stored["records"].items():
        assert stored["columns"][table] == expected, table
    assert any(handed) and not all(handed)  # columns taken, and declined for Loss/loss
    got = stored["records"]
    assert len(got["metrics"]) > 1800 and len(got["evals"]) > 400
    assert any("checksum" in e[4] for e in got["errors"])
    assert len([a for a in got["attempts"] if a[4] == "step_back"]) == 1
    assert {"log_step", "log_run", "epoch"} <= set(got["metric columns"])


def test_a_bulk_read_is_handed_over_as_the_records_columns(tmp_path):
    """The columns of one read, table for table, offset for offset, as from_records makes
    them of its records (the read is large enough for tfbulk's templates)."""
    data = write(tmp_path, range(0, 2000))
    got = tfevents.read(data, 0, final=True)
    made = columnar.parsed(got, first=True)
    expected = careful.from_records(tfevents.records(got), got.problems, first=True)
    assert made is not None and made.rows.num_rows > 1000
    assert made.rows.equals(expected.rows) and made.evals.equals(expected.evals)
    assert made.rows.schema == expected.rows.schema
    assert (made.row_offsets, made.eval_offsets, made.problems) == (
        expected.row_offsets, expected.eval_offsets, expected.problems)


def real_event_files() -> list[Path]:
    found = sorted(REALDATA.rglob("events.out.tfevents.*")) if REALDATA.is_dir() else []
    return found + sorted(DATA.rglob("events.out.tfevents.*"))


@pytest.mark.parametrize("path", real_event_files() or [None], ids=str)
def test_real_event_files_are_handed_over_as_their_records(path):
    if path is None:
        pytest.skip("no event files in ../shared/realdata or tests/data")
    data = path.read_bytes()
    got = tfevents.read(data, 0, final=True)
    made = columnar.parsed(got, first=True)
    expected = careful.from_records(tfevents.records(got), got.problems, first=True)
    if made is None:
        return  # declined: the records are what is stored
    for mine, theirs in ((made.rows, expected.rows), (made.evals, expected.evals)):
        assert (mine is None) == (theirs is None) and (mine is None or mine.equals(theirs))
    assert (made.row_offsets, made.eval_offsets, made.problems) == (
        expected.row_offsets, expected.eval_offsets, expected.problems)


@pytest.mark.parametrize("byte", ["wall time", "step", "value", "tag", "stored checksum"])
@pytest.mark.parametrize("record", [1, 700])  # 1: the first of its length, the template's
def test_a_bulk_record_whose_data_checksum_fails_is_skipped_with_its_offset(
        tmp_path, byte, record):
    """tfbulk.py checks the data checksums of the records a template fits in bulk (CRC-32C
    is linear), the others one by one: a byte changed anywhere in one record skips it, as a
    call of crc32c per record did, and its neighbours are read as they were."""
    data = bulk.write(tmp_path)
    bad = frames(data)[record]
    body = tfrecord.read(data, 0)[0][record][1]
    event = tfevents.Event.FromString(body)
    (value,) = event.summary.value
    at = {"wall time": 1, "step": 10, "tag": body.index(value.tag.encode()),
          "value": body.index(struct.pack("<f", value.simple_value)),
          "stored checksum": len(body)}[byte]
    broken = corrupt(data, bad + tfrecord.HEADER + at)
    got = tfevents.read(broken, 0, final=True)
    assert [(p.offset, p.severity) for p in got.problems] == [(bad, "error")]
    assert "data checksum" in got.problems[0].reason
    assert bulk.rows(tfevents.records(got)) == bulk.careful(broken)
