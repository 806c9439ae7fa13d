"""Attention backends and the drafter's block mask."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.attention import causal_attention, flash_available
from trainer.config import make_config
from trainer.drafter import Drafter, block_mask


def reference_causal(q, k, v):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    n = q.shape[-2]
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


def test_sdpa_matches_a_plain_softmax_reference():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 17, 8) for _ in range(3))
    assert torch.allclose(causal_attention(q, k, v, "sdpa"), reference_causal(q, k, v), atol=1e-5)


@pytest.mark.skipif(not flash_available(), reason="needs a CUDA GPU and the flash_attn package")
def test_flash_matches_sdpa_on_gpu():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 32, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flash, sdpa = causal_attention(q, k, v, "flash"), causal_attention(q, k, v, "sdpa")
    assert torch.allclose(flash.float(), sdpa.float(), atol=2e-2, rtol=2e-2)


def test_block_mask_sees_prefix_to_anchor_and_whole_own_block():
    mask = block_mask(torch.tensor([[2, 5]]), ctx_len=8, block_size=3)[0, 0]
    assert mask.shape == (6, 8 + 6)
    assert mask[0, :8].tolist() == [True] * 3 + [False] * 5  # block 0: positions 0..2
    assert mask[4, :8].tolist() == [True] * 6 + [False] * 2  # block 1: positions 0..5
    assert mask[0, 8:].tolist() == [True] * 3 + [False] * 3  # own block, no causal mask
    assert mask[5, 8:].tolist() == [False] * 3 + [True] * 3


def test_drafter_ignores_context_after_the_anchor_but_sees_its_whole_block():
    config = make_config("tiny", out="x")
    torch.manual_seed(0)
    drafter = Drafter(config).eval()
    width = len(config.drafter.hidden_layers) * config.target.target_dim
    context = torch.randn(1, 20, width)
    anchors = torch.tensor([[6, 12]])
    tokens = torch.randint(3, config.corpus.vocab_size, (1, 2 * config.drafter.block_size))
    base = drafter(context, tokens, anchors)
    later = context.clone()
    later[:, 7:] += 1.0  # beyond the first anchor
    out = drafter(later, tokens, anchors)
    assert torch.allclose(out[:, 0], base[:, 0]) and not torch.allclose(out[:, 1], base[:, 1])
    changed = tokens.clone()
    last = config.drafter.block_size - 1
    changed[0, last] = (changed[0, last] + 1) % 60 + 3
    out = drafter(context, changed, anchors)
    assert not torch.allclose(out[:, 0, 0], base[:, 0, 0])  # first position sees the last
    assert torch.allclose(out[:, 1], base[:, 1])  # other blocks do not
