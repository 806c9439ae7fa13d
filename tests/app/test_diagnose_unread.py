"""A run that could not be read is never reported as clean, and runs of other trainers end
(issue 19, sections 0 and 1): `diagnose` through the CLI names each file not read and why,
exits 3 when a run it reports on has one, and says what it could not judge; a run whose log
reached its planned total is finished once its log stops growing, one cut short is idle."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx

from app.read import runs
from tests.app.test_ingest_bad_input import ingest
from tests.conftest import SHARED, needs_realdata, run_cli, wait_for

DATA = Path(__file__).resolve().parents[1] / "data" / "unread"
UNREAD_EXIT = 3  # docs: diagnose's exit status when a log of a run reported on was not read


def diagnosed(folder: Path, *extra: str):
    return run_cli("diagnose", str(folder), *extra)


def copied(tmp_path: Path, name: str) -> Path:
    # written now, as a run's log is: a fixture's old modification time reads as an old log
    return Path(shutil.copytree(DATA / name, tmp_path / "logs" / name,
                                copy_function=shutil.copy))


def test_a_text_file_that_is_no_log_is_not_read_and_not_clean(tmp_path):
    folder = copied(tmp_path, "prose")
    done = diagnosed(folder)
    assert done.returncode == UNREAD_EXIT, done.stderr
    assert "No incidents" not in done.stdout
    assert "notes.txt" in done.stdout and "not a log yet" in done.stdout  # the file and why
    found = json.loads(diagnosed(folder, "--json").stdout)
    assert [(i["kind"], i["file"]) for i in found] == [("unread", "notes.txt")]


def test_a_folder_holding_no_log_name_says_so(tmp_path):
    folder = tmp_path / "logs" / "notes"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# what I tried\n\nloss went down.\n")
    done = diagnosed(folder)
    assert done.returncode == UNREAD_EXIT, done.stderr
    assert "README.md" in done.stdout and "not a name read" in done.stdout
    assert "No incidents" not in done.stdout


def test_an_empty_folder_is_not_clean(tmp_path):
    folder = tmp_path / "logs" / "fresh"
    folder.mkdir(parents=True)
    done = diagnosed(folder)
    assert done.returncode == UNREAD_EXIT, done.stderr
    assert "Nothing read in" in done.stdout and "No incidents" not in done.stdout


def test_a_run_with_no_time_field_says_stalls_were_not_judged(tmp_path):
    done = diagnosed(copied(tmp_path, "untimed"))
    assert done.returncode == 0, done.stderr
    assert "No incidents in run untimed" in done.stdout
    assert "no time field: stalls not judged" in done.stdout
    assert "no accuracy-like metric: cliffs not judged" in done.stdout
    assert "spikes" not in done.stdout.split("Not judged")[1]  # its loss was judged


def test_one_good_log_and_one_unreadable_file(tmp_path):
    folder = copied(tmp_path, "mixed")
    done = diagnosed(folder)
    assert done.returncode == UNREAD_EXIT, done.stderr
    assert "No incidents in run" not in done.stdout
    assert "40 lines read of run mixed" in done.stdout
    assert "events.out.tfevents.1700000000.host" in done.stdout
    assert "checksum does not match" in done.stdout
    found = json.loads(diagnosed(folder, "--json").stdout)
    assert [(i["kind"], i["file"]) for i in found] == [
        ("unread", "events.out.tfevents.1700000000.host")]
    # the log directory above it reports the same file under its own path
    whole = diagnosed(folder.parent)
    assert whole.returncode == UNREAD_EXIT and "mixed/events.out.tfevents" in whole.stdout


def test_a_log_repeated_by_another_is_listed_but_misses_nothing(tmp_path):
    folder = copied(tmp_path, "untimed")
    (folder / "metrics.jsonl").write_text((folder / "log.jsonl").read_text())
    done = diagnosed(folder)
    assert done.returncode == 0, done.stderr
    assert "log.jsonl" in done.stdout and "nothing is missed" in done.stdout
    assert json.loads(diagnosed(folder, "--json").stdout) == []


def test_an_unknown_run_says_which_runs_exist(tmp_path):
    copied(tmp_path, "untimed")
    copied(tmp_path, "mixed")
    done = diagnosed(tmp_path / "logs" / "demo")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "demo is not a folder" in done.stderr
    assert "runs in" in done.stderr and "mixed, untimed" in done.stderr


def states(logs: Path, idle_after: float = 300.0) -> tuple[dict, dict]:
    """Each run's state on the Runs page now, and once its log has not grown for
    ``idle_after`` seconds."""
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        cursor, now = mon.db.cursor(), time.time()

        def at(when: float) -> dict[str, str]:
            table = runs.page(cursor, runs.Ask(limit=None), when, idle_after=idle_after).table
            return dict(zip(table["run"], table["state"], strict=True))

        return at(now), at(now + idle_after + 1)


def test_runs_that_reached_their_planned_total_end_finished(tmp_path):
    """A Trainer checkpoint's state at max_steps, a LLaMA-Factory log at total_steps with no
    closing line, Megatron at iteration 20/ 20: finished; a LLaMA-Factory log cut at 20 of
    30, Megatron killed at 14 of 20: live, then idle, never finished."""
    names = ("hf-at-max", "lf-at-total", "lf-cut", "megatron-done", "megatron-killed")
    for name in names:
        copied(tmp_path, name)
    now, later = states(tmp_path / "logs")
    assert now["lf-cut"] == now["megatron-killed"] == "live"
    assert later == {"hf-at-max": "finished", "lf-at-total": "finished", "lf-cut": "idle",
                     "megatron-done": "finished", "megatron-killed": "idle"}


@needs_realdata
def test_a_megatron_run_killed_before_its_total_is_idle_never_finished(tmp_path):
    for name in ("megatron-lm-llama1b-killed", "megatron-ds-qwen7b"):  # 344 of 500; 500/500
        shutil.copytree(SHARED / "realdata" / name, tmp_path / "logs" / name)
    now, later = states(tmp_path / "logs")
    assert now["megatron-lm-llama1b-killed"] != "finished"
    assert later == {"megatron-lm-llama1b-killed": "idle", "megatron-ds-qwen7b": "finished"}


def test_a_server_watching_the_run_names_its_files_not_read_too(tmp_path, make_server):
    folder = copied(tmp_path, "mixed")
    server = make_server(folder.parent)
    answer = wait_for(lambda: (lambda a: a if a["unread"] else None)(
        httpx.get(server.url + "/api/incidents", params={"run": "mixed"}).json()))
    assert [(u["file"], u["missed"]) for u in answer["unread"]] == [
        ("mixed/events.out.tfevents.1700000000.host", True)]
    done = diagnosed(folder)  # asks the server (its server.json), reads nothing itself
    assert done.returncode == UNREAD_EXIT, done.stderr
    assert "mixed/events.out.tfevents.1700000000.host" in done.stdout
    assert "No incidents in run" not in done.stdout
