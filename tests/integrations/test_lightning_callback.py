"""The Lightning callback on a real ``lightning.pytorch`` Trainer (CPU, a one-layer module):
30 steps, a checkpoint every 10 whose write at step 20 takes 3 s (a CheckpointIO that sleeps,
as a slow filesystem would), then a second launch resumed from the step-10 checkpoint that
crashes at step 25. What it wrote must pass `validate`, `diagnose` must name the checkpoint as
the cause of the stall after step 20 and of the loss spike a bad update makes right after it,
and the save's seconds must be its own: a callback that sleeps in the step-20 hook before the
save adds nothing to them."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli
from tests.integrations.realtrain import diagnosed, incident, launch, lines

# the module both scripts train: one linear layer learning the sum of its 4 inputs
TINY = r'''
import torch
import lightning.pytorch as pl

class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def mse(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)
'''

TRAIN = TINY + r'''
import sys, time
from pathlib import Path
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from cliffwatch.integrations.lightning import CliffwatchCallback

logs, ckpt, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

class SlowIO(TorchCheckpointIO):  # the write of step 20's checkpoint takes 3 s
    def save_checkpoint(self, checkpoint, path, storage_options=None):
        if checkpoint["global_step"] == 20:
            time.sleep(3)
        super().save_checkpoint(checkpoint, path, storage_options)

class Busy(Callback):  # 1 s of other work in the hook before the save: not the save's; a
    # spike after it; the resumed launch's crash
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 20:
            time.sleep(1)
        if trainer.global_step == 21 and mode == "first":  # a bad update right after the save
            with torch.no_grad():
                pl_module.layer.weight.mul_(30)
        if mode == "resume" and trainer.global_step == 25:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

class Logged(Tiny):
    def training_step(self, batch, batch_idx):
        loss = self.mse(batch)
        self.log("train_mse", loss)
        return loss
    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.mse(batch))

torch.manual_seed(0)
torch.set_num_threads(1)  # a tiny model on a shared machine: threads only contend
x = torch.randn(64, 4)
data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
loader = lambda: torch.utils.data.DataLoader(data, batch_size=4)
saves = ModelCheckpoint(dirpath=ckpt, every_n_train_steps=10, save_top_k=-1)
trainer = pl.Trainer(max_steps=30, accelerator="cpu", devices=1, logger=False,
                     log_every_n_steps=1, limit_val_batches=2, enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=0, plugins=[SlowIO()],
                     callbacks=[CliffwatchCallback(logdir=logs, name="pl", system=False),
                                Busy(), saves])
trainer.fit(Logged(), loader(), loader(),
            ckpt_path=str(ckpt / "epoch=0-step=10.ckpt") if mode == "resume" else None)
'''


def train(tmp_path: Path, mode: str):
    return launch(tmp_path / "train.py", TRAIN, tmp_path / "logs", tmp_path / "ckpt", mode)


def test_a_real_lightning_run_resumed_and_crashed_writes_what_names_its_slow_save(tmp_path):
    first = train(tmp_path, "first")
    assert first.returncode == 0, first.stderr[-3000:]
    resumed = train(tmp_path, "resume")
    assert resumed.returncode != 0 and "CUDA out of memory" in resumed.stderr
    run = tmp_path / "logs" / "pl"
    events = lines(run / "events.jsonl")
    ends = [e for e in events if e["event"] == "checkpoint_end"]
    assert [e["step"] for e in ends] == [10, 20, 30, 20]
    slow = ends[1]
    assert 3 <= slow["blocked_s"] < 3.9, slow  # the write's 3 s, not Busy's second before it
    assert slow["path"].endswith("step=20.ckpt") and slow["bytes"] > 0
    assert [e["step"] for e in events if e["event"] == "eval_end"] == [16, 16]
    # the resumed launch goes on inside epoch 0: no epoch starts at its step 11
    assert [(e["epoch"], e["step"]) for e in events if e["event"] == "epoch_start"] == [
        (0, 1), (1, 17), (1, 17)]
    resume = next(e for e in events if e["event"] == "resume")
    assert resume["from_step"] == 10 and resume["checkpoint"].endswith("step=10.ckpt")
    assert [(e["status"], e["step"]) for e in events if e["event"] == "run_end"] == [
        ("completed", 30), ("failed", 25)]
    metrics = lines(run / "metrics.jsonl")
    assert {"loss", "lr", "train_mse"} <= metrics[0].keys()
    evals = [m for m in metrics if "val_loss" in m]  # a line of their own, at their step
    assert [m["step"] for m in evals] == [16, 16] and "loss" not in evals[0]

    told = diagnosed(run)
    stall = incident(told, "STALL at step 21")
    assert "Likely cause: checkpoint." in stall, told
    # the seconds a save logged (3 and more: a loaded machine adds to the sleep). Both launches
    # stall after their step-20 save, at the same step: one incident, quoting either's
    saves = {f"blocked the training loop for {e['blocked_s']:.1f} s"
             for e in ends if e["step"] == 20}
    assert any(save in stall for save in saves), told
    # only the first launch spikes: its own save's seconds, not the resumed launch's
    spike = incident(told, "SPIKE in loss at step 22")
    assert "Likely causes: checkpoint," in spike, told
    assert f"blocked the training loop for {slow['blocked_s']:.1f} s" in spike, told


DDP = TINY + r'''
from cliffwatch.integrations.lightning import CliffwatchCallback

class Plain(Tiny):
    def training_step(self, batch, batch_idx):
        return self.mse(batch)

if __name__ == "__main__":  # Lightning starts rank 1 by running this script again
    torch.set_num_threads(1)
    x = torch.randn(64, 4)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    trainer = pl.Trainer(max_steps=6, accelerator="cpu", devices=2, strategy="ddp",
                         logger=False, log_every_n_steps=1, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False,
                         callbacks=[CliffwatchCallback(logdir="logs", system=False)])
    trainer.fit(Plain(), torch.utils.data.DataLoader(data, batch_size=4))
'''


def test_two_ddp_processes_with_no_name_write_one_run_with_a_rank_file_each(tmp_path):
    """Without a name each process would name the run from its own clock and process ids:
    rank 0's name is broadcast, so the two processes write one run folder, rank 0 its
    metrics and both their rank{N}.jsonl (seconds per step, waiting for input)."""
    done = launch(tmp_path / "ddp.py", DDP, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = list((tmp_path / "logs").iterdir())
    assert sorted(p.name for p in run.iterdir()) == [
        "events.jsonl", "metrics.jsonl", "rank0.jsonl", "rank1.jsonl", "run.json"]
    for rank in (0, 1):
        steps = lines(run / f"rank{rank}.jsonl")
        assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
        assert all(s["rank"] == rank and s["data_wait_s"] <= s["step_time_s"] for s in steps)
    valid = run_cli("validate", str(run))
    assert valid.returncode == 0, valid.stdout + valid.stderr
