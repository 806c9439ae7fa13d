"""What the integration tests share: a training script run as its own process (the real
library imported there, as a user's script imports it), its JSONL files read back, and what
the real CLI (`validate`, `ingest --once`, `diagnose`) says of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, run_cli

# one thread each (a tiny model on a shared machine: threads only contend), nothing downloaded
ENV = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
       "HF_HUB_OFFLINE": "1"}


# the head of the Hugging Face scripts: a tokenized corpus and a tiny GPT-2 built from a
# config (nothing downloaded); each script seeds torch before it builds the model
GPT2 = r'''
import torch
from transformers import GPT2Config, GPT2LMHeadModel

class Tokens(torch.utils.data.Dataset):  # n windows of 8 token ids, each its own labels
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        ids = torch.arange(i, i + 8) % 32
        return {"input_ids": ids, "labels": ids}

def tiny_gpt2():
    return GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=16, n_embd=8, n_layer=1,
                                      n_head=1))
'''


def launch(script: Path, text: str, *args: Path | str,
           cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Write ``text`` to ``script`` and run it with ``args``; its output is kept."""
    script.write_text(text)
    return subprocess.run([sys.executable, str(script), *map(str, args)], cwd=cwd,
                          env={**os.environ, **ENV}, capture_output=True, text=True,
                          timeout=180)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def diagnosed(run: Path) -> str:
    """`validate` the run, `ingest --once` its logs folder, and return `diagnose`'s report."""
    valid = run_cli("validate", str(run))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    done = run_cli("ingest", "--logdir", str(run.parent), "--once")
    assert done.returncode == 0, done.stderr
    return run_cli("diagnose", str(run.parent)).stdout


def incident(report: str, heading: str) -> str:
    """The paragraph of ``report`` after ``heading`` (which must be there)."""
    assert heading in report, report
    return report.split(heading, 1)[1].split("\n\n", 1)[0]
