"""The DFlash-style block drafter: one forward pass proposes `block_size` tokens.

A block is the anchor token followed by `block_size - 1` mask tokens. The drafter reads the
target's hidden states from a few layers spread through it (`hidden_layers`, concatenated,
then projected to its width) as context. In every drafter layer each block position attends
to the context up to and including its anchor and to every position of its own block, with
no causal mask inside the block. All anchors of a sequence share one attention call.

    logits = drafter(context, block_tokens, anchors)   # (B, A, S, V)
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import masked_attention
from .config import Config


class DraftLayer(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm_x, self.norm_ctx, self.norm_mlp = (nn.LayerNorm(dim) for _ in range(3))
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, d = t.shape
        return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.norm_x(x)
        keys = torch.cat([self.norm_ctx(ctx), h], dim=1)
        k, v = self.kv(keys).chunk(2, dim=-1)
        out = masked_attention(self.split(self.q(h)), self.split(k), self.split(v), mask)
        x = x + self.proj(out.transpose(1, 2).flatten(2))
        return x + self.mlp(self.norm_mlp(x))


def block_mask(anchors: torch.Tensor, ctx_len: int, block_size: int) -> torch.Tensor:
    """(B, 1, A*S, ctx_len + A*S) bool: context up to the anchor, plus the query's own block."""
    b, a = anchors.shape
    block_of = torch.arange(a * block_size, device=anchors.device) // block_size
    anchor_of_query = anchors[:, block_of]  # (B, A*S)
    ctx_ok = torch.arange(ctx_len, device=anchors.device) <= anchor_of_query[..., None]
    own_block = block_of[:, None] == block_of[None, :]  # (A*S, A*S)
    return torch.cat([ctx_ok, own_block.expand(b, -1, -1)], dim=-1)[:, None]


class Drafter(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        drafter, vocab = config.drafter, config.corpus.vocab_size
        dim = drafter.drafter_dim
        self.block_size = drafter.block_size
        self.embed = nn.Embedding(vocab, dim)
        self.offset = nn.Embedding(drafter.block_size, dim)  # position inside the block
        self.ctx_proj = nn.Linear(len(drafter.hidden_layers) * config.target.target_dim, dim)
        self.layers = nn.ModuleList(
            DraftLayer(dim, drafter.drafter_heads) for _ in range(drafter.drafter_layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(
        self, context: torch.Tensor, block_tokens: torch.Tensor, anchors: torch.Tensor
    ) -> torch.Tensor:
        """context (B, L, K*Dt), block_tokens (B, A*S), anchors (B, A) -> logits (B, A, S, V)."""
        b, a = anchors.shape
        offsets = torch.arange(self.block_size, device=anchors.device).repeat(a)
        x = self.embed(block_tokens) + self.offset(offsets)
        ctx = self.ctx_proj(context)
        mask = block_mask(anchors, context.shape[1], self.block_size)
        for layer in self.layers:
            x = layer(x, ctx, mask)
        return self.head(self.norm(x)).view(b, a, self.block_size, -1)
