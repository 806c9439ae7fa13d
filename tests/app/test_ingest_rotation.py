"""Log rotation loses nothing: copytruncate (same inode, rewritten past the old offset) starts a
new attempt from the file's start, and logrotate's ``create`` (rename, new file) reads the old
file to its end, found by inode, before the new one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.app.test_ingest_bad_input import ingest, query


def lines(steps, loss: float = 1.0) -> str:
    # longer than the 64 first bytes kept as the file's head, as real lines are
    return "".join(json.dumps({"step": s, "loss": loss, "learning_rate": 0.0003,
                               "grad_norm": 1.25, "tokens_per_s": 51234.5}) + "\n"
                   for s in steps)


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def test_copytruncate_rewritten_past_the_offset_is_read_from_the_start(tmp_path):
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines(range(1, 6)))
    with ingest(tmp_path / "logs") as mon:
        shutil.copy(path, path.with_name("metrics.jsonl.1"))
        # truncated, then rewritten (a restarted trainer) with the same first line, and grown
        # past the old offset before the tailer looks again
        path.write_text(lines([1]) + lines(range(2, 9), loss=0.5))
        mon.tailer.tick()
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(5 + 8,)]
        assert query(mon, "SELECT attempt, start_step, reason FROM attempts ORDER BY attempt") \
            == [(1, 1, "start"), (2, 1, "file_replaced")]
        # the metrics view shows the new file's timeline alone, not the two stitched together
        assert query(mon, "SELECT step, loss FROM metrics ORDER BY step") == [
            (1, 1.0), *((s, 0.5) for s in range(2, 9))]


def test_logrotate_create_reads_the_renamed_file_to_its_end(tmp_path):
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines(range(1, 11)))
    with ingest(tmp_path / "logs") as mon:
        trainer = path.open("a")  # the trainer's handle follows the inode through the rename
        trainer.write(lines(range(11, 16)))
        trainer.flush()
        path.rename(path.with_name("metrics.jsonl.1"))
        trainer.write(lines(range(16, 18)))  # before it reopens its log
        trainer.close()
        path.write_text(lines(range(18, 21)))  # the new file
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [
            (s,) for s in range(1, 21)]
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(20,)]
        reasons = [r[0] for r in query(mon, "SELECT reason FROM ingest_errors")]
        assert any("renamed to metrics.jsonl.1" in r for r in reasons)
        append(path, lines([21]))
        mon.tailer.tick()
        assert query(mon, "SELECT max(step) FROM metrics") == [(21,)]


def test_rename_seen_before_the_new_file_exists(tmp_path):
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines(range(1, 4)))
    with ingest(tmp_path / "logs") as mon:
        append(path, lines(range(4, 7)))
        os.rename(path, path.with_name("metrics.jsonl.1"))
        mon.tailer.tick(discover=True)  # rotated, not yet created
        assert query(mon, "SELECT count(*) FROM metrics") == [(6,)]
        path.write_text(lines(range(7, 9)))
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [
            (s,) for s in range(1, 9)]



def test_lines_written_to_the_rotated_file_after_the_switch_arrive(tmp_path):
    # the reviewer's case C2: logrotate `create`, the tailer switches to the new (empty)
    # file, and only then the trainer writes through its old handle, then reopens
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines(range(100)))
    with ingest(tmp_path / "logs") as mon:
        trainer = path.open("a")
        path.rename(path.with_name("metrics.jsonl.1"))
        path.write_text("")  # create
        mon.tailer.tick(discover=True)  # the switch
        trainer.write(lines(range(100, 120)))
        trainer.close()
        append(path, lines(range(120, 150)))
        mon.tailer.tick(discover=True)
        mon.tailer.tick()
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [
            (s,) for s in range(150)]
        assert query(mon, "SELECT count(*) FROM metrics_all") == [(150,)]
        assert query(mon, "SELECT count(*) FROM ingest_errors WHERE severity = 'error'") \
            == [(0,)]
        # once it has not grown for a while, the rotated file is let go
        mon.tailer.rotated["r/metrics.jsonl"].grew -= 60
        mon.tailer.tick()
        assert not mon.tailer.rotated


def test_late_lines_of_the_rotated_file_keep_its_attempt(tmp_path):
    # read after the new file's first lines, they still belong to the old file's timeline
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines(range(100)))
    with ingest(tmp_path / "logs") as mon:
        trainer = path.open("a")
        path.rename(path.with_name("metrics.jsonl.1"))
        path.write_text(lines(range(120, 150)))
        mon.tailer.tick(discover=True)
        trainer.write(lines(range(100, 120)))
        trainer.close()
        mon.tailer.tick()
        assert query(mon, "SELECT step FROM metrics ORDER BY step") == [
            (s,) for s in range(150)]
        assert query(mon, "SELECT attempt, start_step, reason FROM attempts ORDER BY 1") == [
            (1, 0, "start"), (2, 120, "file_replaced")]


def test_a_log_rewritten_whole_and_renamed_over_itself_is_read_on(tmp_path):
    # writers that rewrite their whole log (a temp file, then os.replace) give each look a new
    # inode; a copy of the folder with its database does too. The bytes read so far are still
    # there: only the new lines are read, in the same attempt
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines(range(1, 6)))
    with ingest(tmp_path / "logs") as mon:
        temp = path.with_name("metrics.jsonl.tmp")
        temp.write_text(lines(range(1, 9)))
        os.replace(temp, path)
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT count(*), count(DISTINCT step) FROM metrics_all") == [(8, 8)]
        assert query(mon, "SELECT attempt, reason FROM attempts") == [(1, "start")]
        # another inode whose bytes differ before the offset is another file: a new attempt
        temp.write_text(lines(range(1, 4), loss=0.25))
        os.replace(temp, path)
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT attempt, reason FROM attempts ORDER BY attempt") == [
            (1, "start"), (2, "file_replaced")]
        assert query(mon, "SELECT step, loss FROM metrics ORDER BY step") == [
            (s, 0.25) for s in range(1, 4)]
