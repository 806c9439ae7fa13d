"""The frozen target: a small causal transformer LM, pre-trained once and cached.

The drafter learns from a *meaningful* LM, so on first use the target is pre-trained for
`target_pretrain_steps` on the synthetic corpus and saved to
`<out parent>/.target-cache/target-<hash>.pt`; later runs (and other ranks) load it at once.
The folder starts with "." so the monitor never scans it.

The target is built from `build_config(config)` alone: the seed and the whole corpus and
target sections, every other setting at its default. The cache key hashes that whole config,
so no list of fields can miss one: a field added to either section keys the cache by itself,
and a setting the build reads outside them is at its default, the same for every run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .attention import causal_attention
from .config import Config, RunConfig
from .corpus import PAD, make_corpus


class Block(nn.Module):
    """Pre-norm transformer block with causal self-attention."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attended = causal_attention(q, k, v, backend).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class TargetLM(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        dim = config.target.target_dim
        self.embed = nn.Embedding(config.corpus.vocab_size, dim)
        self.pos = nn.Embedding(config.corpus.max_len, dim)
        self.blocks = nn.ModuleList(
            Block(dim, config.target.target_heads) for _ in range(config.target.target_layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, config.corpus.vocab_size, bias=False)
        self.backend = "sdpa"

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits (B, L, V) and the output of every block (1-based: hiddens[i-1])."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.pos(positions)
        hiddens = []
        for block in self.blocks:
            x = block(x, self.backend)
            hiddens.append(x)
        return self.head(self.norm(x)), hiddens


def build_config(config: Config) -> Config:
    """All the target is built from: the seed, the corpus and the target sections."""
    return Config(run=RunConfig(seed=config.run.seed), corpus=config.corpus, target=config.target)


def cache_path(config: Config) -> Path:
    key = json.dumps(dataclasses.asdict(build_config(config)), sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(config.run.out).resolve().parent / ".target-cache" / f"target-{digest}.pt"


def pad_rows(rows: list[np.ndarray], length: int | None = None) -> torch.Tensor:
    """Right-padded (B, L) int64 tensor of token rows."""
    length = length or max(len(r) for r in rows)
    out = np.full((len(rows), length), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : min(len(row), length)] = row[:length]
    return torch.from_numpy(out)


def pretrain(config: Config, corpus: list[np.ndarray]) -> TargetLM:
    """A few hundred AdamW steps of next-token prediction on random 128-token crops."""
    torch.manual_seed(config.run.seed + 1)
    model = TargetLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.target.target_lr)
    rng = np.random.default_rng([config.run.seed, 99])
    for _ in range(config.target.target_pretrain_steps):
        rows = [corpus[i] for i in rng.integers(len(corpus), size=16)]
        tokens = pad_rows(rows, min(128, max(len(r) for r in rows)))
        logits, _ = model(tokens[:, :-1])
        loss = F.cross_entropy(
            logits.flatten(0, 1), tokens[:, 1:].flatten(), ignore_index=PAD
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model.eval().requires_grad_(False)


def load_target(config: Config, build: bool = True) -> tuple[TargetLM, dict]:
    """The cached target (pre-training it first if `build`), frozen, plus facts for events."""
    path, config = cache_path(config), build_config(config)
    started = time.monotonic()
    if path.exists():
        model = TargetLM(config)
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return model.eval().requires_grad_(False), {"cached": True, "path": str(path)}
    if not build:
        raise FileNotFoundError(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(len(os.sched_getaffinity(0)))  # nothing else runs yet: use every core
    try:
        model = pretrain(config, make_corpus(config))
    finally:
        torch.set_num_threads(threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)  # atomic: a concurrent reader sees no file or a whole one
    seconds = round(time.monotonic() - started, 2)
    return model, {"cached": False, "path": str(path), "pretrain_s": seconds}
