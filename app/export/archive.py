"""One export: for each table and run, write what the archive lacks, then record it.

An appended table (metrics, evals, ranks, events, attempts) gets one new part per run that
has rows past its mark, holding exactly those rows. A replaced table (incidents, runs) has one
part per run, rewritten whole when its fingerprint changed. Small runs are read many at a
time, one query (one request) per batch, and cut into their parts (batches.py). The manifest
is saved last, and every SAVE_EVERY_S seconds of a long export::

    summary = export(source, Path("archive"))
    summary.tables["metrics"]  -> Written(runs=1, files=1, rows=1000000, bytes=34238796)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ..errors import CliffwatchError
from . import batches, layout
from .manifest import Manifest
from .tables import TABLES, Table, batch_rows

SAVE_EVERY_S = 10.0  # a killed export writes again at most this long's parts


@dataclass
class Written:
    runs: int = 0
    files: int = 0
    rows: int = 0
    bytes: int = 0


@dataclass
class Summary:
    tables: dict[str, Written] = field(default_factory=lambda: {t.name: Written()
                                                                for t in TABLES})
    too_long: list[str] = field(default_factory=list)  # runs whose folder name cannot be made

    @property
    def files(self) -> int:
        return sum(w.files for w in self.tables.values())


def export(source, root: Path) -> Summary:
    """Bring the archive at ``root`` up to date with ``source``; returns what was written."""
    with _locked(root):
        manifest = Manifest.load(root)
        state = source.marks()
        manifest.check_database(state["database"])
        summary, saved = Summary(), time.monotonic()
        try:
            for t in TABLES:
                pending = _pending(manifest, t, state["tables"].get(t.name, []), summary)
                budget = batch_rows(state.get("columns", {}).get(t.name))
                for group in batches.plan(pending, budget):
                    _write_group(source, root, manifest, t, group, budget,
                                 summary.tables[t.name])
                    if time.monotonic() - saved > SAVE_EVERY_S:
                        manifest.save()
                        saved = time.monotonic()
        except BaseException:
            # what was written so far is whole and recorded: the next export goes on from it
            with contextlib.suppress(OSError):
                manifest.save()
            raise
        manifest.save()
    return summary


@dataclass
class Pending:
    """One run of one table with something to write: rows past ``after`` up to ``mark``."""

    run: str
    mark: object
    after: int  # appended tables: the highest row id archived, -1 for none
    rows: int  # rows the part is read from (sizes batches)
    expected: int | None  # appended tables: the rows the part must hold
    number: int  # the part's number
    done: dict  # what the manifest held before


def _pending(manifest: Manifest, t: Table, entries: list[dict], summary: Summary
             ) -> list[Pending]:
    """The runs of ``t`` whose mark moved since the archive was written."""
    pending = []
    for entry in entries:
        run, mark = entry["run"], entry["mark"]
        if not layout.fits(run):
            if run not in summary.too_long:
                summary.too_long.append(run)
            continue
        done = manifest.done(t.name, run)
        if done["mark"] == mark:
            continue
        if t.replaced:
            pending.append(Pending(run, mark, -1, entry["rows"], None, 1, done))
        else:
            _check_grown(manifest, t, run, done, entry)
            after = -1 if done["mark"] is None else done["mark"]
            expected = entry["rows"] - done["rows"]
            pending.append(Pending(run, mark, after, expected, expected, done["parts"] + 1,
                                   done))
    return pending


def _write_group(source, root: Path, manifest: Manifest, t: Table, group: list[Pending],
                 budget: int, written: Written) -> None:
    """Write one part per run of ``group``: one run over ``budget`` rows streamed from its own
    read, the others cut from one read of them all."""
    if len(group) == 1 and group[0].rows > budget:
        item = group[0]
        with source.rows(t, item.run, item.after, item.mark) as reader:
            _write(source, root, manifest, t, item, reader, written)
        return
    with source.batch(t, group) as reader:
        answer = reader.read_all()  # at most about ``budget`` rows: see batches.plan
    for item, (_, rows) in zip(group, batches.split(answer, [i.run for i in group]),
                               strict=True):
        _write(source, root, manifest, t, item, rows.to_reader(), written)


def _write(source, root: Path, manifest: Manifest, t: Table, item: Pending,
           reader: pa.RecordBatchReader, written: Written) -> None:
    """Write ``item``'s rows as its part, atomically, then record it in the manifest."""
    run, done = item.run, item.done
    kept = 1 if t.replaced else done["parts"]  # a replaced table's part is renamed over
    layout.clear_unrecorded(layout.run_dir(root, t.name, run), kept, manifest.archive)

    def check(count: int) -> None:
        if item.expected is not None and count != item.expected:
            raise CliffwatchError(
                f"{source.where} sent {count} {t.name} rows of run {run!r} where "
                f"{item.expected} were counted (interrupted?); nothing of them was kept: run "
                "the export again")

    path = layout.part_path(root, t.name, run, item.number)
    count, size = layout.write_parquet(reader, path, check, manifest.archive)
    total = count if t.replaced else done["rows"] + count
    manifest.record(t.name, run, item.mark, total, item.number if count else done["parts"])
    written.runs += 1
    written.files += 1 if count else 0
    written.rows += count
    written.bytes += size


def _check_grown(manifest: Manifest, t: Table, run: str, done: dict, entry: dict) -> None:
    """Appended rows are never removed: fewer rows, or a lower mark, than the archive holds
    means the database is not the one the archive was written from."""
    if done["mark"] is not None and (entry["mark"] < done["mark"]
                                     or entry["rows"] < done["rows"]):
        raise CliffwatchError(
            f"the database holds {entry['rows']} {t.name} rows of run {run!r} up to row "
            f"{entry['mark']}, but {manifest.path.parent} already holds {done['rows']} up to "
            f"{done['mark']}: it was written from another database. Export to a new --to "
            "folder")


@contextlib.contextmanager
def _locked(root: Path):
    """One export at a time per archive: two would number their parts alike."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / layout.LOCK, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise CliffwatchError(f"cannot write to --to {root} ({exc.strerror}); pass a folder "
                              "you can write to") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CliffwatchError(f"another export is writing to {root}; wait for it to "
                                  "finish, then run this again") from None
        yield
    finally:
        os.close(fd)
