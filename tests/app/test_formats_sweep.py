"""Readers say the true thing about logs met in a sweep of further public logs (issue 19
section 1, findings R6, R7 and R11): a Hugging Face prediction or test pass is an evaluation
row at its step, not an ingest error; a LLaMA-Factory trainer_log.jsonl skipped beside
trainer_state.json takes the run's only time field with it, which `diagnose` says instead of
"nothing is missed"; a Git LFS pointer named like a log is named as one, with what to run.
Fixtures (tests/data/sweep/) are synthetic, of the shapes the real logs had."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from app.diagnose import coverage
from app.ingest.formats import detect, hf_state
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import run_cli, wait_for

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep"
UNREAD_EXIT = 3  # docs: diagnose's exit status when a log of a run reported on was not read
POINTER = (DATA / "lfs-pointer" / "train.log").read_bytes()
POINTED = "a Git LFS pointer (81,234 bytes of log not fetched): run `git lfs pull`"


def copied(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(DATA / name, tmp_path / "logs" / name,
                                copy_function=shutil.copy))


# ---- R6: predict_* and test_* entries of trainer_state.json ---------------------------------

def test_prediction_and_test_passes_are_evaluations_at_their_step(tmp_path):
    copied(tmp_path, "predict")
    monitor = ingest(tmp_path / "logs")
    try:
        errors = query(monitor, "SELECT reason FROM ingest_errors WHERE severity <> 'info'")
        assert errors == []  # was 4 errors: "no step-like key (step, ...)" for each pass
        # logged without a step: at the step of the entry before it, where training stood
        assert query(monitor, "SELECT step, kind, predict_loss FROM evals "
                     "WHERE predict_loss IS NOT NULL ORDER BY step") == [
            (50, "eval", 1.85), (100, "eval", 1.75), (150, "eval", 1.65)]
        assert query(monitor, "SELECT step, kind FROM evals WHERE test_loss IS NOT NULL") == [
            (150, "eval")]
        assert query(monitor, "SELECT count(*), max(step) FROM metrics_all") == [(15, 150)]
    finally:
        monitor.close()


def test_a_state_ending_in_a_prediction_pass_grows_without_a_new_attempt(tmp_path):
    folder = copied(tmp_path, "predict")
    path = folder / "trainer_state.json"
    state = json.loads(path.read_text())
    whole = state["log_history"]
    first = next(i for i, e in enumerate(whole) if "predict_loss" in e) + 1
    path.write_text(json.dumps({**state, "log_history": whole[:first]}, indent=2))
    monitor = ingest(tmp_path / "logs")
    try:
        path.write_text(json.dumps(state, indent=2))  # the next save: the same entries and more
        monitor.tailer.tick(discover=True)
        assert query(monitor, "SELECT count(*) FROM attempts") == [(1,)]
        assert query(monitor, "SELECT count(*), count(DISTINCT step) FROM metrics_all") == [
            (15, 15)]
        assert query(monitor, "SELECT count(*) FROM evals WHERE predict_loss IS NOT NULL") == [
            (3,)]
    finally:
        monitor.close()


def test_counting_entries_read_before_places_a_prediction_pass_at_the_same_step():
    # a state stored with no Resume (an older database) is checked by the step of the last
    # entry read: a pass logged without a step must be at the step it was given then
    data = (DATA / "predict" / "trainer_state.json").read_bytes()
    state = json.loads(data)
    first = next(i for i, e in enumerate(state["log_history"]) if "predict_loss" in e) + 1
    before = hf_state.parse(json.dumps({**state, "log_history": state["log_history"][:first]},
                                       indent=2).encode())
    assert (before.entries, before.last_step) == (first, 50)
    again = hf_state.parse(data, stored=before.entries, last_step=before.last_step)
    assert again.status == hf_state.OK  # not REWRITTEN: the same history, not a new attempt
    assert again.records[0].data["step"] == 60


# ---- R7: the time held only by a trainer_log.jsonl that is not read -------------------------

def test_a_skipped_trainer_log_holding_the_only_time_says_stalls_were_not_judged(tmp_path):
    folder = copied(tmp_path, "lf-beside-state")
    done = run_cli("diagnose", str(folder))
    assert done.returncode == 0, done.stderr
    said = "stalls not judged: the time is in trainer_log.jsonl, which is not read"
    assert said in done.stdout.split("Files not read")[0]  # the run's blind spot
    assert said in done.stdout.split("Files not read")[1]  # and why the file matters
    assert "nothing is missed" not in done.stdout
    assert "no time field" not in done.stdout
    assert json.loads(run_cli("diagnose", str(folder), "--json").stdout) == []


def test_a_server_says_what_the_skipped_trainer_log_leaves_unjudged(tmp_path, make_server):
    folder = copied(tmp_path, "lf-beside-state")
    server = make_server(folder.parent)
    answer = wait_for(lambda: (lambda a: a if a["unread"] else None)(httpx.get(
        server.url + "/api/incidents", params={"run": "lf-beside-state"}).json()))
    assert [(u["file"], u["missed"], u["unseen"]) for u in answer["unread"]] == [
        ("lf-beside-state/trainer_log.jsonl", False,
         "stalls not judged: the time is in trainer_log.jsonl, which is not read")]
    done = run_cli("diagnose", str(folder))  # asks the server (its server.json)
    assert done.returncode == 0, done.stderr
    assert "which is not read)" in done.stdout and "nothing is missed" not in done.stdout


def test_a_skipped_trainer_log_misses_nothing_when_the_read_log_has_the_time(tmp_path):
    folder = copied(tmp_path, "lf-beside-state")
    (folder / "trainer_state.json").unlink()
    (folder / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "elapsed_s": 31.0 * s / 10, "loss": 2.0 - 0.003 * s}) + "\n"
        for s in range(10, 210, 10)))
    monitor = ingest(tmp_path / "logs")
    try:
        found = coverage.unread(monitor.db.cursor())
        assert [(u.file, u.missed, u.unseen) for u in found] == [
            ("lf-beside-state/trainer_log.jsonl", False, "")]
        assert found[0].note == "nothing is missed: another log of the run is read"
    finally:
        monitor.close()


# ---- R11: a Git LFS pointer under a log's name ----------------------------------------------

@pytest.mark.parametrize("name", ["train.log", "trainer_log.jsonl", "trainer_state.json",
                                  "metrics.csv", "events.out.tfevents.1700000000.host"])
def test_a_git_lfs_pointer_is_named_as_one_under_any_log_name(name):
    fmt, why = detect.detect(name, POINTER)
    assert fmt == detect.PENDING  # `git lfs pull` replaces it: it is looked at again then
    assert POINTED in why and "as it grows" not in why
    if name == "train.log":  # only the pointer's own lines are one: a log quoting it is a log
        head = POINTER + b"step 1/100 | loss 11.01 | lr 6.00e-04 | 3788.44 ms\n"
        assert detect.detect(name, head)[0] == detect.TEXT


def test_diagnose_names_the_lfs_pointer_and_what_to_run(tmp_path):
    done = run_cli("diagnose", str(copied(tmp_path, "lfs-pointer")))
    assert done.returncode == UNREAD_EXIT, done.stderr
    assert POINTED in done.stdout and "No incidents" not in done.stdout
    assert "looked at again as it grows" not in done.stdout


def test_the_pulled_log_is_read_where_its_pointer_was(tmp_path):
    folder = copied(tmp_path, "lfs-pointer")
    monitor = ingest(tmp_path / "logs")
    try:
        assert [r for (r,) in query(monitor, "SELECT reason FROM ingest_errors")] == [
            f"{detect.NOT_YET}: {POINTED} in its repository"]
        assert query(monitor, "SELECT count(*) FROM metrics_all") == [(0,)]
        pulled = folder / "train.log.tmp"  # git writes the file beside it, then renames it
        pulled.write_text("".join(f"step {s:4d}/100 | loss {11 - s / 20:.4f} | lr 6.00e-04 | "
                                  "3788.44 ms\n" for s in range(1, 101)))
        pulled.replace(folder / "train.log")
        monitor.tailer.tick(discover=True)
        assert query(monitor, "SELECT count(*), max(step) FROM metrics_all") == [(100, 100)]
    finally:
        monitor.close()
