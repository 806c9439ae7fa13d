"""cliffwatch.init / Run: what each call writes, checked against the format's own validator
(app.logformat, what `python -m app validate` runs) and by reading the files back."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

import pytest

import cliffwatch
from app.logformat import validate_run
from tests.conftest import ROOT, run_cli


def lines(path: Path) -> list[dict]:
    return [json.loads(raw) for raw in path.read_text().splitlines()]


def kinds(run_dir: Path) -> list[str]:
    return [e["event"] for e in lines(run_dir / "events.jsonl")]


@pytest.fixture
def finish_after():
    """Each test's run ends here even when an assertion fails first."""
    yield
    cliffwatch.finish()


def test_a_run_writes_metrics_events_checkpoints_and_run_json(tmp_path, finish_after):
    ckpt = tmp_path / "runs" / "demo" / "ckpt"
    run = cliffwatch.init(logdir=tmp_path / "runs", name="demo", config={"lr": 3e-4},
                          system=False)
    assert run.dir == tmp_path / "runs" / "demo" and cliffwatch.run is run
    run.log({"loss": 0.81, "accuracy": 0.16}, step=2000)
    with run.checkpoint(step=2000, path=ckpt):
        ckpt.mkdir()
        (ckpt / "model.pt").write_bytes(b"x" * 1000)
    run.epoch(2, step=4228)
    run.log({"loss": 0.7, "grad/norm": float("nan")}, step=4229, buckets=[5, 5, 5, 5],
            epoch=2)
    run.log({"loss": 0.6})  # no step: the last one + 1
    run.finish()
    assert validate_run(run.dir) == []
    metrics = lines(run.dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [2000, 4229, 4230]
    assert metrics[1]["buckets"] == [5, 5, 5, 5] and metrics[1]["epoch"] == 2
    assert "grad/norm" in metrics[1] and metrics[1]["grad/norm"] != metrics[1]["grad/norm"]
    assert all({"elapsed_s", "time"} <= m.keys() for m in metrics)
    assert kinds(run.dir) == ["run_start", "checkpoint_start", "checkpoint_end",
                              "epoch_start", "run_end"]
    end = lines(run.dir / "events.jsonl")[2]
    assert end["bytes"] == 1000 and end["path"] == str(ckpt)
    assert end["blocked_s"] == end["duration_s"] >= 0
    last = lines(run.dir / "events.jsonl")[-1]
    assert (last["status"], last["reason"], last["step"]) == ("completed", "finished", 4230)
    doc = json.loads((run.dir / "run.json").read_text())
    assert doc["format"] == "cliffwatch/1" and doc["run_id"] == "demo"
    assert doc["config"] == {"lr": 3e-4} and doc["world_size"] == 1


def test_config_changes_rewrite_run_json_and_summary_lands_at_finish(tmp_path, finish_after):
    run = cliffwatch.init(logdir=tmp_path, name="c", config={"lr": 0.1}, system=False)
    cliffwatch.config.batch = 8
    run.config.update({"warmup": 100})
    assert json.loads((run.dir / "run.json").read_text())["config"] == \
        {"lr": 0.1, "batch": 8, "warmup": 100}
    cliffwatch.summary["best_loss"] = 0.5
    assert "summary" not in json.loads((run.dir / "run.json").read_text())
    cliffwatch.finish()
    assert json.loads((run.dir / "run.json").read_text())["summary"] == {"best_loss": 0.5}
    assert not list(run.dir.glob(".*.tmp"))  # replaced atomically, nothing left behind


def test_values_that_are_not_numbers_are_left_out_once(tmp_path, finish_after, capsys):
    run = cliffwatch.init(logdir=tmp_path, name="v", system=False)
    for step in range(3):
        run.log({"loss": 1, "flag": True, "note": "text", "train": {"acc": 0.5}}, step=step)
    run.finish()
    assert lines(run.dir / "metrics.jsonl")[0]["train/acc"] == 0.5
    assert "note" not in lines(run.dir / "metrics.jsonl")[0]
    assert capsys.readouterr().err.count("'note' is a str") == 1
    assert validate_run(run.dir) == []


def test_resume_appends_a_new_attempt_with_a_resume_event(tmp_path, finish_after):
    first = cliffwatch.init(logdir=tmp_path, name="r", system=False)
    for step in range(5):
        first.log({"loss": 1.0 / (step + 1)}, step=step)
    first.finish()
    again = cliffwatch.init(logdir=tmp_path, name="r", resume=True, system=False)
    assert again.last_step == 4
    again.log({"loss": 0.1})
    again.finish()
    events = lines(again.dir / "events.jsonl")
    assert [e["event"] for e in events] == ["run_start", "run_end", "run_start", "resume",
                                            "run_end"]
    assert events[2]["resumed"] is True and events[3]["from_step"] == 4
    assert [m["step"] for m in lines(again.dir / "metrics.jsonl")] == [0, 1, 2, 3, 4, 5]
    assert validate_run(again.dir) == []


def test_only_rank_0_writes_metrics_and_every_rank_its_rank_file(tmp_path, finish_after):
    runs = [cliffwatch.Run(tmp_path / "ddp", rank=r, world_size=2, writes=r == 0)
            for r in (0, 1)]
    for run in runs:
        run.start(resumed=False, step=0)
        run.log({"loss": 0.5}, step=1)
        run.rank_line(1, step_time_s=0.4, data_wait_s=0.1)
        run.finish()
    assert sorted(p.name for p in (tmp_path / "ddp").iterdir()) == [
        "events.jsonl", "metrics.jsonl", "rank0.jsonl", "rank1.jsonl", "run.json"]
    assert len(lines(tmp_path / "ddp" / "metrics.jsonl")) == 1
    assert kinds(tmp_path / "ddp") == ["run_start", "run_end"]
    assert lines(tmp_path / "ddp" / "rank1.jsonl")[0]["rank"] == 1
    assert validate_run(tmp_path / "ddp") == []


def test_init_takes_rank_and_world_size_from_torchrun_env(tmp_path, monkeypatch,
                                                          finish_after):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    run = cliffwatch.init(logdir=tmp_path, name="env", system=False)
    run.log({"loss": 1.0}, step=1)
    run.rank_line(1, step_time_s=0.1, data_wait_s=0.0)
    run.finish()
    assert (run.rank, run.world_size) == (1, 2)
    assert sorted(p.name for p in run.dir.iterdir()) == ["rank1.jsonl"]
    mine = cliffwatch.init(logdir=tmp_path, name="all", all_ranks=True, system=False)
    mine.log({"loss": 1.0}, step=1)
    mine.rank_line(1, step_time_s=0.1, data_wait_s=0.0)
    mine.finish()
    assert mine.dir.name == "all-rank1" and (mine.dir / "metrics.jsonl").exists()
    assert (tmp_path / "all" / "rank1.jsonl").exists()  # beside the other ranks' files


def test_lines_from_many_threads_are_whole_and_none_is_lost(tmp_path, finish_after):
    run = cliffwatch.init(logdir=tmp_path, name="t", system=False)

    def writer(n: int) -> None:
        for i in range(2000):
            run.log({"loss": float(i), "thread": n}, step=i)
            if i % 100 == 0:
                run.event("note", i, thread=n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.finish()
    got = lines(run.dir / "metrics.jsonl")  # json.loads of every line: none is torn
    assert sorted((m["thread"], m["step"]) for m in got) == \
        sorted((n, i) for n in range(4) for i in range(2000))
    assert kinds(run.dir).count("note") == 80


WANDB_SCRIPT = """
import cliffwatch as wandb

wandb.init(project="drafts", name="lr-sweep-1", entity="team", tags=["a"], notes="x",
           config={"lr": 0.003, "epochs": 2}, system=False)
for step in range(10):
    wandb.log({"train/loss": 1.0 / (step + 1), "lr": wandb.config.lr})
wandb.summary["best"] = 0.1
wandb.finish()
"""


def test_a_wandb_script_runs_with_one_changed_import(tmp_path):
    """`import cliffwatch as wandb`: W&B-only arguments are accepted; project is a folder."""
    (tmp_path / "train.py").write_text(WANDB_SCRIPT)
    import subprocess

    done = subprocess.run([sys.executable, str(tmp_path / "train.py")], cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "drafts" / "lr-sweep-1"
    assert [m["step"] for m in lines(run_dir / "metrics.jsonl")] == list(range(10))
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["run_id"] == "drafts/lr-sweep-1" and doc["summary"] == {"best": 0.1}
    checked = run_cli("validate", str(run_dir))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_an_unknown_init_argument_is_an_error_naming_it(tmp_path):
    with pytest.raises(TypeError, match="lerning_rate"):
        cliffwatch.init(logdir=tmp_path, lerning_rate=3)


def test_log_before_init_says_to_call_init(monkeypatch):
    monkeypatch.setattr(cliffwatch, "run", None)
    with pytest.raises(RuntimeError, match=r"cliffwatch.init\("):
        cliffwatch.log({"loss": 1.0})


def test_init_starts_the_system_sampler_and_finish_stops_it(tmp_path, finish_after):
    pytest.importorskip("psutil", reason="the sampler needs psutil (cliffwatch[system])")
    run = cliffwatch.init(logdir=tmp_path, name="s", sample_s=0.2)
    assert run.sampler is not None
    run.log({"loss": 1.0}, step=7)
    run.finish()
    assert run.sampler is None
    samples = lines(run.dir / "system.jsonl")
    assert samples and samples[-1]["step"] == 7  # the last sample, written at stop
    assert "cliffwatch-system" not in [t.name for t in threading.enumerate()]  # joined


def test_runs_without_a_name_get_distinct_readable_names(tmp_path, finish_after):
    first = cliffwatch.init(logdir=tmp_path, system=False)
    second = cliffwatch.init(logdir=tmp_path, system=False)
    assert first.dir != second.dir and first.dir.parent == tmp_path
    assert re.fullmatch(r"[\w.-]+-\d{8}-\d{6}(-\d+)?", second.name), second.name
