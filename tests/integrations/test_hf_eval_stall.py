"""A stall the log explains with an evaluation it announced (issue 21, section 2): the Hugging
Face callback writes ``eval_start`` / ``eval_end`` (with ``duration_s``) around each evaluation,
and diagnosis names ``evaluation`` for a stall whose gap holds one, quoting its seconds. A real
Trainer (CPU, a tiny GPT-2 built from a config, nothing downloaded) runs 12 steps with an
evaluation at step 10 whose dataset is slow (~3 s) and no save at all. Then, from v1 files as
the callbacks write them, a save and an evaluation in one gap: the one that took longer comes
first."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.integrations.realtrain import incident, launch, lines

TRAIN = r'''
import sys, time
from pathlib import Path
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from cliffwatch.integrations.transformers import CliffwatchCallback

logs, out = Path(sys.argv[1]), Path(sys.argv[2])

class Tokens(torch.utils.data.Dataset):  # n windows of 8 token ids; slow: seconds an item
    def __init__(self, n, slow=0.0):    # takes to read (the eval set's slow disk)
        self.rows = (torch.arange(n)[:, None] + torch.arange(8)) % 32
        self.slow = slow
    def __len__(self):
        return len(self.rows)
    def __getitem__(self, i):
        time.sleep(self.slow)
        return {"input_ids": self.rows[i], "labels": self.rows[i]}

torch.manual_seed(0)
torch.set_num_threads(1)
tiny = {"vocab_size": 32, "n_positions": 16, "n_embd": 8, "n_layer": 1, "n_head": 1}
model = GPT2LMHeadModel(GPT2Config(**tiny))
args = TrainingArguments(output_dir=str(out), max_steps=12, eval_steps=10, eval_strategy="steps",
                         save_strategy="no", logging_steps=1, per_device_train_batch_size=2,
                         per_device_eval_batch_size=4, report_to="none", use_cpu=True,
                         disable_tqdm=True, dataloader_num_workers=0, seed=0)
Trainer(model=model, args=args, train_dataset=Tokens(64), eval_dataset=Tokens(8, 0.4),
        callbacks=[CliffwatchCallback(logdir=logs, name="hf-eval", system=False)]).train()
'''


def test_a_slow_evaluation_in_a_real_trainer_names_evaluation_for_its_stall(tmp_path):
    done = launch(tmp_path / "train.py", TRAIN, tmp_path / "logs", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    events = lines(tmp_path / "logs" / "hf-eval" / "events.jsonl")
    assert not [e for e in events if e["event"].startswith("checkpoint")], events
    end = next(e for e in events if e["event"] == "eval_end")
    assert end["step"] == 10 and end["duration_s"] >= 3, events

    assert run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once").returncode == 0
    told = run_cli("diagnose", str(tmp_path / "logs")).stdout
    stall = incident(told, "STALL at step 11")
    assert "Likely cause: evaluation." in stall, told
    assert (f"evaluation (logged: events.jsonl): an evaluation pass at step 10 ran for "
            f"{end['duration_s']:.1f} s, inside the ") in stall, told


def v1_run(folder: Path, save_s: float, eval_s: float) -> None:
    """40 lines 0.1 s apart, then at step 20 an evaluation of ``eval_s`` and a save of
    ``save_s`` before step 21 (the Trainer's order: log, evaluate, save)."""
    folder.mkdir(parents=True)
    gap = eval_s + save_s
    elapsed = [0.1 * s + (gap if s > 20 else 0.0) for s in range(1, 41)]
    (folder / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 3.0 - 0.01 * s, "elapsed_s": round(t, 3)}) + "\n"
        for s, t in zip(range(1, 41), elapsed, strict=True)))
    at = elapsed[19]
    events = [{"event": "eval_start", "step": 20, "elapsed_s": at},
              {"event": "eval_end", "step": 20, "duration_s": eval_s, "elapsed_s": at + eval_s},
              {"event": "checkpoint_start", "step": 20, "elapsed_s": at + eval_s},
              {"event": "checkpoint_end", "step": 20, "blocked_s": save_s, "duration_s": save_s,
               "elapsed_s": at + gap}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_a_save_and_an_evaluation_in_one_gap_rank_by_their_seconds(tmp_path):
    v1_run(tmp_path / "logs" / "slow-save", save_s=6.0, eval_s=2.0)
    v1_run(tmp_path / "logs" / "slow-eval", save_s=2.0, eval_s=6.0)
    assert run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once").returncode == 0
    told = run_cli("diagnose", str(tmp_path / "logs")).stdout
    save = incident(told, "slow-save: STALL at step 21")
    assert "Likely causes: checkpoint, evaluation." in save, told
    evaluation = incident(told, "slow-eval: STALL at step 21")
    assert "Likely causes: evaluation, checkpoint." in evaluation, told
    assert "an evaluation pass at step 20 ran for 6.0 s, inside the 8.1 s gap" in evaluation
