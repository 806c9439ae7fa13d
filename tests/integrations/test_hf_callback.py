"""The Hugging Face callback on the real transformers Trainer (CPU, a tiny GPT-2 built from a
config, nothing downloaded): 30 steps with a save every 15 and an evaluation every 10, the save
at step 15 made slow (its save_model sleeps 3 s, as a slow filesystem would) and a bad update
right after it, then a second launch resumed from checkpoint-15 that crashes at step 25. What
it wrote must pass `validate`, and `diagnose` must name the checkpoint as the cause of the
stall after step 15 and of the loss thrown up after it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integrations.realtrain import GPT2, diagnosed, incident, launch, lines

TRAIN = GPT2 + r'''
import sys, time
from pathlib import Path
from transformers import Trainer, TrainerCallback, TrainingArguments
from cliffwatch.integrations.transformers import CliffwatchCallback

logs, out, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

class SlowSaves(Trainer):  # the weights' write at step 15 takes 3 s (a slow filesystem)
    def save_model(self, output_dir=None, _internal_call=False):
        if self.state.global_step == 15 and mode == "first":
            time.sleep(3)
        super().save_model(output_dir, _internal_call)

class Crash(TrainerCallback):  # a bad update right after the slow save; the resumed launch
    def on_step_end(self, args, state, control, **kwargs):  # dies inside its step 25
        if mode == "first" and state.global_step == 16:
            with torch.no_grad():
                kwargs["model"].transformer.wte.weight.mul_(300)
        if mode == "resume" and state.global_step == 25:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

torch.manual_seed(0)
torch.set_num_threads(1)  # a tiny model on a shared machine: threads only contend
model = tiny_gpt2()
args = TrainingArguments(output_dir=str(out), max_steps=30, save_steps=15, eval_steps=10,
                         eval_strategy="steps", logging_steps=1, per_device_train_batch_size=2,
                         per_device_eval_batch_size=4, report_to="none", use_cpu=True,
                         disable_tqdm=True, dataloader_num_workers=0, seed=0)
watch = CliffwatchCallback(logdir=logs, name="hf", system=False)
trainer = SlowSaves(model=model, args=args, train_dataset=Tokens(64), eval_dataset=Tokens(8),
                    callbacks=[watch, Crash()])
trainer.train(resume_from_checkpoint=str(out / "checkpoint-15") if mode == "resume" else None)
'''


def train(tmp_path: Path, mode: str):
    return launch(tmp_path / "train.py", TRAIN, tmp_path / "logs", tmp_path / "out", mode)


def test_a_real_trainer_resumed_and_crashed_writes_what_names_its_slow_save(tmp_path):
    first = train(tmp_path, "first")
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "logs" / "hf"
    assert "train_runtime" in json.loads((run / "run.json").read_text())["summary"]
    resumed = train(tmp_path, "resume")
    assert resumed.returncode != 0 and "illegal memory access" in resumed.stderr
    events = lines(run / "events.jsonl")
    saves = [(e["event"], e["step"]) for e in events if e["event"].startswith("checkpoint")]
    assert saves == [("checkpoint_start", 15), ("checkpoint_end", 15),
                     ("checkpoint_start", 30), ("checkpoint_end", 30)]
    slow = next(e for e in events if e["event"] == "checkpoint_end")
    assert slow["blocked_s"] >= 3 and slow["path"].endswith("checkpoint-15")
    assert [e["step"] for e in events if e["event"] == "eval_end"] == [10, 20, 30, 20]
    metrics = lines(run / "metrics.jsonl")
    assert {"loss", "grad_norm", "learning_rate", "epoch"} <= metrics[0].keys()
    evals = [m for m in metrics if "eval_loss" in m]  # a line of their own, at their step
    assert [m["step"] for m in evals] == [10, 20, 30, 20] and "loss" not in evals[0]
    assert [e["epoch"] for e in events if e["event"] == "epoch_start"] == [0]
    resume = next(e for e in events if e["event"] == "resume")
    assert resume["step"] == resume["from_step"] == 15
    assert resume["checkpoint"].endswith("checkpoint-15")
    ends = [e for e in events if e["event"] == "run_end"]
    assert [e["reason"] for e in ends] == ["finished", "error"], ends
    assert "illegal memory access" in ends[1]["error"]

    told = diagnosed(run)
    stall = incident(told, "STALL at step 16")
    assert "Likely cause: checkpoint." in stall, told
    # the seconds the save logged (3 and more: a loaded machine adds to the sleep)
    assert (f"checkpoint at step 15 blocked the training loop for {slow['blocked_s']:.1f} s"
            in stall), told
    # the loss the bad update threw up (a spike, or a divergence when it stays up)
    after = incident(told, " in loss at step 17")
    assert "Likely cause: checkpoint." in after or "Likely causes: checkpoint," in after


EPOCHS = GPT2 + r'''
import sys, time
from pathlib import Path
from transformers import Trainer, TrainingArguments
from cliffwatch.integrations.transformers import CliffwatchCallback

logs, out = Path(sys.argv[1]), Path(sys.argv[2])

class SlowSaves(Trainer):  # every save's write takes 1.5 s
    def save_model(self, output_dir=None, _internal_call=False):
        time.sleep(1.5)
        super().save_model(output_dir, _internal_call)

torch.manual_seed(0)
torch.set_num_threads(1)
model = tiny_gpt2()
args = TrainingArguments(output_dir=str(out), num_train_epochs=2, save_strategy="epoch",
                         logging_steps=1, per_device_train_batch_size=2, report_to="none",
                         use_cpu=True, disable_tqdm=True, seed=0)
SlowSaves(model=model, args=args, train_dataset=Tokens(8),
          callbacks=[CliffwatchCallback(logdir=logs, name="epochs", system=False)]).train()
'''


def test_a_save_at_each_epoch_end_is_timed_from_before_it(tmp_path):
    """save_strategy="epoch": the Trainer saves after on_epoch_end, with no step flag set; the
    save's start is written there, before the save, not after it at on_save."""
    done = launch(tmp_path / "epochs.py", EPOCHS, tmp_path / "logs", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    events = lines(tmp_path / "logs" / "epochs" / "events.jsonl")
    saves = [e for e in events if e["event"].startswith("checkpoint")]
    assert [(e["event"], e["step"]) for e in saves] == [
        ("checkpoint_start", 4), ("checkpoint_end", 4), ("checkpoint_start", 8),
        ("checkpoint_end", 8)]
    for start, end in zip(saves[::2], saves[1::2], strict=True):
        assert end["elapsed_s"] - start["elapsed_s"] >= 1.5, saves
        assert 1.5 <= end["blocked_s"] < 2.5 and end["path"].endswith(f"-{end['step']}")
    assert [(e["epoch"], e["step"]) for e in events if e["event"] == "epoch_start"] == [
        (0, 1), (1, 5)]
