"""Checkpoint saves cliffwatch infers (app/ingest/saves.py, issue 19), through the real ingest:
a Hugging Face output folder that holds only checkpoint-N/ folders is read while it trains (the
real transformers Trainer, with report_to="none"), Lightning's checkpoints/*.ckpt and
torchtitan's checkpoint/step-N/ become inferred checkpoint events, and diagnosis gives the
cause ``checkpoint`` for a stall right after such a save."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import ROOT, run_cli, wait_for
from tests.integrations.realtrain import GPT2


def state(upto: int, final: bool = False, save_steps: int = 4) -> str:
    """A trainer_state.json as the Trainer writes it (sorted keys, indent 2) at step ``upto``."""
    history = [{"epoch": s / 20, "grad_norm": 1.0, "learning_rate": 1e-4,
                "loss": 2.0 - s / 100, "step": s} for s in range(1, upto + 1)]
    if final:
        history.append({"epoch": upto / 20, "step": upto, "train_loss": 1.9,
                        "train_runtime": 12.5})
    return json.dumps({"global_step": upto, "log_history": history, "max_steps": 12,
                       "num_train_epochs": 1, "save_steps": save_steps}, indent=2,
                      sort_keys=True)


def checkpoint(out: Path, step: int) -> None:
    folder = out / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights: never read")
    (folder / "optimizer.pt").write_bytes(b"never read")
    (folder / "trainer_state.json").write_text(state(step))
    FOLDER_TIMES[step] = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                       time.gmtime(folder.stat().st_mtime))


def rows_of(mon, run: str) -> tuple[int, int, int]:
    return query(mon, f"SELECT count(*), count(DISTINCT step), count(DISTINCT attempt) "
                      f"FROM metrics_all WHERE run = '{run}'")[0]


def saves_of(mon, run: str) -> list[tuple]:
    return query(mon, f"SELECT step, data->>'source' FROM events WHERE run = '{run}' AND kind = "
                      "'checkpoint_end' AND (data->>'inferred')::BOOLEAN ORDER BY step, 2")


def test_an_hf_output_folder_of_checkpoints_only_is_read_each_entry_once(tmp_path):
    """The newest checkpoint's state is the run's log; each later one goes on from it; the
    final trainer_state.json takes over; a checkpoint deleted by save_total_limit says
    nothing; each checkpoint-N/ folder is a save inferred at N, and each save is one
    event (save_steps does not say them again)."""
    out = tmp_path / "logs" / "out"
    checkpoint(out, 4)
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert rows_of(mon, "out") == (4, 4, 1)
        checkpoint(out, 8)
        mon.tailer.catch_up()
        assert rows_of(mon, "out") == (8, 8, 1)
        shutil.rmtree(out / "checkpoint-4")  # save_total_limit=1
        (out / "trainer_state.json").write_text(state(10, final=True))  # no save at 10
        mon.tailer.catch_up()
        assert rows_of(mon, "out") == (10, 10, 1)
        assert query(mon, "SELECT run FROM runs") == [("out",)]
        assert query(mon, "SELECT count(*) FROM evals WHERE run = 'out' AND kind = 'summary'"
                     ) == [(1,)]
        assert query(mon, "SELECT file FROM ingest_errors WHERE severity <> 'info'") == []
        found = saves_of(mon, "out")
        assert [s for s, _ in found] == [4, 8]
        assert found[0][1] == f"folder checkpoint-4/ appeared at {FOLDER_TIMES[4]}"


FOLDER_TIMES: dict[int, str] = {}  # checkpoint() notes each folder's time as the source says it


def test_saves_deleted_before_cliffwatch_looked_come_from_save_steps(tmp_path):
    out = tmp_path / "logs" / "out"
    checkpoint(out, 8)  # checkpoint-4 went with save_total_limit=1
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert rows_of(mon, "out") == (8, 8, 1)
        assert saves_of(mon, "out") == [(4, "save_steps 4 in trainer_state.json"),
                                        (8, f"folder checkpoint-8/ appeared at "
                                            f"{FOLDER_TIMES[8]}")]


def test_a_lightning_run_folder_gets_a_save_at_each_ckpt(tmp_path):
    run = tmp_path / "logs" / "lightning_logs" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.csv").write_text("epoch,step,train_loss\n" + "".join(
        f"{s // 10},{s},{1.0 / s}\n" for s in range(1, 31)))
    for name in ("epoch=0-step=10.ckpt", "epoch=1-step=20.ckpt"):
        (run / "checkpoints" / name).write_bytes(b"never read")
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert saves_of(mon, "lightning_logs/version_0") == [
            (10, f"file epoch=0-step=10.ckpt written at {when(run / 'checkpoints', 10)}"),
            (20, f"file epoch=1-step=20.ckpt written at {when(run / 'checkpoints', 20)}")]
        assert rows_of(mon, "lightning_logs/version_0") == (30, 30, 1)
        assert query(mon, "SELECT count(*) FROM runs") == [(1,)]  # the checkpoints/ folder is none
        mon.tailer.catch_up()  # stored once
        assert len(saves_of(mon, "lightning_logs/version_0")) == 2


def when(folder: Path, step: int) -> str:
    name = next(p for p in folder.iterdir() if p.name.endswith(f"step={step}.ckpt"))
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(name.stat().st_mtime))


def test_a_weights_file_with_no_step_in_its_name_is_placed_by_its_time(tmp_path):
    run = tmp_path / "logs" / "run7"
    run.mkdir(parents=True)
    start = time.time() - 1000
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 1.0, "time": start + s}) + "\n" for s in range(1, 101)))
    (run / "model.pt").write_bytes(b"never read")
    os.utime(run / "model.pt", (start + 40.5, start + 40.5))
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        (step, source), = saves_of(mon, "run7")
        assert step == 40 and source.endswith(", after step 40 by the times of the run's lines")


def test_weights_with_no_log_beside_them_make_no_run_and_no_time_places_none(tmp_path):
    logs = tmp_path / "logs"
    (logs / "pretrained").mkdir(parents=True)
    (logs / "pretrained" / "model_step1000.pt").write_bytes(b"never read")  # no log: no run
    (logs / "notime").mkdir()
    (logs / "notime" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 11)))
    (logs / "notime" / "model.pt").write_bytes(b"never read")
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        assert query(mon, "SELECT run FROM runs") == [("notime",)]
        assert query(mon, "SELECT count(*) FROM events") == [(0,)]
        (note,), = query(mon, "SELECT reason FROM ingest_errors WHERE file = 'notime/model.pt'")
        assert note.startswith("file model.pt written at ") and "carry no time" in note
        mon.tailer.catch_up()  # said once
        assert query(mon, "SELECT count(*) FROM ingest_errors") == [(1,)]


def titan_log(path: Path, stall_at: int) -> None:
    """torchtitan's lines with its logging prefix (the lines' time), one a second, and a
    gap of 300 s before step ``stall_at``."""
    lines, now = [], time.mktime((2026, 11, 30, 12, 0, 0, 0, 0, -1))
    for step in range(1, 201):
        now += 300 if step == stall_at else 1
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        lines.append(f"[titan] {stamp},000 - root - INFO - step: {step:3d}  loss: "
                     f"{4 - step / 100:.4f}  memory: 1.00GiB(1.0%)  tps: 1,234  mfu: 5.1%\n")
    path.write_text("".join(lines))


def test_a_stall_right_after_a_torchtitan_save_beside_its_text_log_is_a_checkpoint(tmp_path):
    run = tmp_path / "logs" / "titan"
    (run / "checkpoint" / "step-100").mkdir(parents=True)
    (run / "checkpoint" / "step-100" / "__0_0.distcp").write_bytes(b"never read")
    titan_log(run / "train.log", stall_at=101)
    done = run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once")
    assert done.returncode == 0, done.stderr
    told = run_cli("diagnose", str(tmp_path / "logs"))
    assert "STALL at step 101" in told.stdout, told.stdout
    assert "Likely cause: checkpoint." in told.stdout
    assert "checkpoint at step 100" in told.stdout


TRAIN = GPT2 + r'''
import sys, time
from pathlib import Path
from transformers import Trainer, TrainerCallback, TrainingArguments

out, gate = Path(sys.argv[1]), Path(sys.argv[2])

class Pause(TrainerCallback):  # holds the run after its second save, until the test says go
    def on_save(self, args, state, control, **kwargs):
        if state.global_step == 6:
            (gate / "paused").touch()
            deadline = time.time() + 120
            while not (gate / "go").exists() and time.time() < deadline:
                time.sleep(0.05)

torch.manual_seed(0)
model = tiny_gpt2()
args = TrainingArguments(output_dir=str(out), max_steps=9, save_steps=3, logging_steps=1,
                         per_device_train_batch_size=2, report_to="none", use_cpu=True,
                         disable_tqdm=True, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(64), callbacks=[Pause()])
trainer.train()
trainer.save_state()  # as the Trainer's example scripts end: output_dir/trainer_state.json
'''


def test_the_real_trainer_with_report_to_none_shows_rows_before_it_ends(tmp_path, make_server):
    """The real transformers Trainer on a tiny GPT-2 built from a config, watched by the real
    server: after its second save (checkpoint-3, checkpoint-6, nothing else in the folder)
    the six steps and both saves are in SQL; after the end, the final trainer_state.json adds
    steps 7 to 9 and nothing twice."""
    logs, gate = tmp_path / "logs", tmp_path / "gate"
    logs.mkdir()
    gate.mkdir()
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    # one torch thread: a tiny model on a shared machine, where threads only contend
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    trainer = subprocess.Popen([sys.executable, str(script), str(logs / "out"), str(gate)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        server = make_server(logs)  # while torch and transformers load
        wait_for(lambda: (gate / "paused").exists() or trainer.poll() is not None, 120)
        assert trainer.poll() is None, trainer.stdout.read()
        assert not (logs / "out" / "trainer_state.json").exists()
        wait_for(lambda: rows(server, SAVES) == [[3, "folder"], [6, "folder"]], 30)
        wait_for(lambda: rows(server, ROWS) == [[6, 6, 1]], 30)
        (gate / "go").touch()
        assert trainer.wait(120) == 0, trainer.stdout.read()
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()
    assert (logs / "out" / "trainer_state.json").exists()
    wait_for(lambda: rows(server, ROWS) == [[9, 9, 1]] and rows(server, SUMMARY) == [[9]], 30)
    assert rows(server, SAVES) == [[3, "folder"], [6, "folder"], [9, "folder"]]


ROWS = ("SELECT count(*), count(DISTINCT step), count(DISTINCT attempt) FROM metrics_all "
        "WHERE run = 'out'")
SAVES = ("SELECT step, split_part(data->>'source', ' ', 1) FROM events WHERE run = 'out' AND "
         "kind = 'checkpoint_end' ORDER BY 1, 2")
SUMMARY = "SELECT DISTINCT step FROM evals WHERE run = 'out' AND kind = 'summary'"


def rows(server, query_text: str) -> list[list]:
    response = server.sql(query_text)
    assert response.status_code == 200, response.text
    return response.json()["rows"]
