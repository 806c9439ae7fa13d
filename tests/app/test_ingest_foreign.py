"""Logs nobody on this project wrote (../shared/realdata, and files written by tensorboardX's
real SummaryWriter) are ingested with no configuration: the right rows, steps, attempts,
epoch boundaries and validation rows kept apart, and nothing called an error."""

from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED

REALDATA = SHARED / "realdata"
pytestmark = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is missing")


@pytest.fixture(scope="module")
def realdata(tmp_path_factory):
    logs = tmp_path_factory.mktemp("realdata") / "logs"
    shutil.copytree(REALDATA, logs, ignore=shutil.ignore_patterns("README.md"))
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        yield mon


def count(mon, sql: str, **params) -> int:
    return mon.db.cursor().execute(sql, params).fetchall()[0][0]


def test_real_logs_give_no_error_rows(realdata):
    assert query(realdata, "SELECT file, reason FROM ingest_errors WHERE severity <> 'info'"
                 ) == []
    # every folder: the text logs and Lightning's metrics.csv too (issue 19)
    assert query(realdata, "SELECT run FROM runs ORDER BY run") == [(run,) for run in sorted(
        p.name for p in REALDATA.iterdir() if p.is_dir())]


def test_hugging_face_state_entries_and_epoch_boundaries(realdata):
    run = "hf-mistral-translator"
    assert count(realdata, "SELECT count(*) FROM metrics_all WHERE run = $r", r=run) == 866
    assert count(realdata, "SELECT count(*) FROM evals WHERE run = $r AND kind = 'summary'",
                 r=run) == 1
    assert query(realdata, "SELECT step FROM events WHERE kind = 'epoch_start' ORDER BY step"
                 ) == [(2170,), (4330,), (6500,)]
    assert query(realdata, "SELECT min(step), max(step), max(grad_norm) FROM metrics_all WHERE "
                 f"run = '{run}'") == [(10, 8660, 16.251842498779297)]


def test_the_llama_factory_log_beside_it_is_skipped_once_with_the_reason(realdata):
    (severity, reason), = query(realdata, "SELECT severity, reason FROM "
                                      "ingest_errors WHERE file LIKE '%trainer_log.jsonl'")
    assert severity == "info" and "trainer_state.json holds the Trainer's whole" in reason


def test_llm_c_training_rows_with_validation_kept_apart(realdata):
    run = "llmc-gpt2-124m"
    assert count(realdata, "SELECT count(*) FROM metrics_all WHERE run = $r", r=run) == 19_552
    assert count(realdata, "SELECT count(*) FROM duckdb_columns() WHERE table_name = "
                 "'metric_rows' AND column_name = 'val_loss'") == 0  # not on the training line
    assert count(realdata, "SELECT count(*) FROM evals WHERE run = $r AND val_loss IS NOT "
                 "NULL", r=run) == 80
    assert query(realdata, f"SELECT grad_norm FROM metrics WHERE run = '{run}' AND step = 8715"
                 ) == [(4.29,)]


def test_slm_resumes_are_attempts(realdata):
    assert query(realdata, "SELECT start_step, prev_step FROM attempts WHERE run = "
                 "'slm-training-restarts' AND reason = 'step_back' ORDER BY attempt") == [
        (20, 40), (7520, 7580), (7520, 7560)]  # step 20 logged twice at the start: no resume


def test_a_log_renamed_to_any_jsonl_name_is_read_the_same(tmp_path):
    logs = tmp_path / "logs"
    for name in ("metrics.jsonl", "train.metrics.jsonl", "log.jsonl"):
        (logs / name.replace(".", "-")).mkdir(parents=True)
        shutil.copy(REALDATA / "slm-training-restarts" / "metrics.jsonl",
                    logs / name.replace(".", "-") / name)
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        tables = [query(mon, "SELECT attempt, step, loss, lr FROM metrics_all WHERE run = "
                        f"'{name.replace('.', '-')}' ORDER BY line_id") for name in
                  ("metrics.jsonl", "train.metrics.jsonl", "log.jsonl")]
        assert len(tables[0]) == 398 and tables[1] == tables[0] and tables[2] == tables[0]
        assert query(mon, "SELECT count(*) FROM ingest_errors WHERE severity <> 'info'") == [
            (0,)]


def test_a_trainer_state_rewritten_whole_with_one_more_entry_adds_exactly_one_row(tmp_path):
    state = json.loads((REALDATA / "hf-mistral-translator" / "trainer_state.json").read_text())
    history = state["log_history"]
    entries, summary = history[:-1], history[-1:]
    path = tmp_path / "logs" / "hf" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(dict(state, log_history=entries[:500]), indent=2))
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert count(mon, "SELECT count(*) FROM metrics_all") == 500
        path.write_text(json.dumps(dict(state, log_history=entries[:501]), indent=2))
        mon.tailer.catch_up()
        assert query(mon, "SELECT count(*), max(step) FROM metrics_all") == [
            (501, entries[500]["step"])]
        path.write_text(json.dumps(dict(state, log_history=entries + summary), indent=2))
        mon.tailer.catch_up()
        assert count(mon, "SELECT count(*) FROM metrics_all") == 866
        assert count(mon, "SELECT count(*) FROM evals") == 1
        assert count(mon, "SELECT count(*) FROM attempts") == 1  # never read as a resume


def test_a_live_tensorboard_writer_shows_new_scalars_soon(tmp_path):
    """New scalars arrive as the writer flushes; the last step waits only until the file has
    settled (settle.SETTLE_S), since more of its scalars may still come."""
    logs = tmp_path / "logs"
    (logs / "tb").mkdir(parents=True)
    writer = SummaryWriter(str(logs / "tb"), flush_secs=3600)
    with ingest(logs) as mon:
        seen = []
        for step in range(1, 6):
            writer.add_scalar("loss", 1.0 / step, step)
            writer.add_scalar("eval/loss", 2.0 / step, step)
            writer.flush()
            start = time.monotonic()
            while count(mon, "SELECT count(*) FROM metrics_all WHERE step = $s", s=step) == 0:
                assert time.monotonic() - start < 10, f"step {step} never arrived"
                writer.flush()  # only what its thread has taken from its queue so far
                mon.tailer.tick(discover=True)
                time.sleep(0.05)
            seen.append(time.monotonic() - start)
        writer.close()
        assert query(mon, "SELECT step, loss FROM metrics_all ORDER BY step") == [
            (s, float(str(np.float32(1.0 / s)))) for s in range(1, 6)]  # as written: float32
        assert count(mon, "SELECT count(*) FROM evals") == 5
        assert count(mon, "SELECT count(*) FROM attempts") == 1
        print("seconds from flush to SQL:", [round(s, 2) for s in seen])


def test_a_checkpoint_folders_trainer_state_is_no_run_of_its_own(tmp_path):
    """The Trainer copies trainer_state.json into every checkpoint-N folder: they are states
    of the output folder's run, of which the newest is read (issue 19: with report_to="none"
    nothing else is there until the end); the older is skipped once, with the reason."""
    source = REALDATA / "hf-mistral-translator" / "trainer_state.json"
    for step in (500, 1000):
        (tmp_path / "logs" / "out" / f"checkpoint-{step}").mkdir(parents=True)
        shutil.copy(source, tmp_path / "logs" / "out" / f"checkpoint-{step}")
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert query(mon, "SELECT run FROM runs") == [("out",)]
        assert count(mon, "SELECT count(*) FROM metrics_all WHERE run = 'out'") == 866
        reasons = query(mon, "SELECT file, severity FROM ingest_errors ORDER BY file")
        assert reasons == [("out/checkpoint-500/trainer_state.json", "info")]


def test_per_step_rows_and_per_epoch_summaries_in_one_file(tmp_path):
    """A log that interleaves per-step rows with per-epoch summary rows keeps both as rows of
    the run: the summaries apart from the training line (so the training line's steps still
    rise), each marking an epoch boundary."""
    lines = []
    for epoch in range(3):
        for step in range(epoch * 100 + 1, epoch * 100 + 101):
            lines.append({"step": step, "loss": 1.0 / step, "lr": 0.1})
        lines.append({"epoch": epoch, "step": epoch * 100 + 100, "train_loss": 0.5 / (epoch + 1),
                      "val_loss": 0.6 / (epoch + 1)})
    path = tmp_path / "logs" / "mixed" / "train_log.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert query(mon, "SELECT count(*), min(step), max(step) FROM metrics") == [(300, 1, 300)]
        assert query(mon, "SELECT kind, step, val_loss FROM evals ORDER BY step") == [
            ("summary", 100 * (e + 1), 0.6 / (e + 1)) for e in range(3)]
        assert query(mon, "SELECT count(*) FROM attempts") == [(1,)]
        assert [r[0] for r in query(mon, "SELECT step FROM events WHERE kind = 'epoch_start' "
                                    "ORDER BY step")] == [100, 200, 300]
        assert query(mon, "SELECT count(*) FROM ingest_errors WHERE severity <> 'info'") == [
            (0,)]
