"""Attention kernels: flash-attn (the `flash_attn` package) on CUDA, PyTorch SDPA otherwise.

`--attn=auto` picks flash when CUDA and flash_attn are both present, `sdpa` otherwise;
`--attn=flash` without them is a user error. flash-attn takes no arbitrary mask, so it serves
the target's causal attention; the drafter's block mask (prefix up to the anchor plus its own
block, not causal) always runs on SDPA, which is what DFlash-style drafters do without
flex-attention. Tensors are (batch, heads, length, head_dim).
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F

from .errors import TrainerError


def flash_available() -> bool:
    return torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None


def resolve_backend(requested: str, device: torch.device) -> str:
    """'flash' or 'sdpa' for `--attn`, or a TrainerError saying how to get flash."""
    can_flash = device.type == "cuda" and flash_available()
    if requested == "flash" and not can_flash:
        raise TrainerError(
            "--attn=flash needs a CUDA GPU and the flash_attn package "
            "(pip install flash-attn --no-build-isolation); use --attn=sdpa or --attn=auto"
        )
    if requested == "auto":
        return "flash" if can_flash else "sdpa"
    return requested


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, backend: str):
    """Causal self-attention with the chosen backend; same layout in and out."""
    if backend == "flash":
        from flash_attn import flash_attn_func  # imported late: CUDA-only package

        dtype = q.dtype if q.dtype in (torch.float16, torch.bfloat16) else torch.bfloat16
        out = flash_attn_func(*(t.transpose(1, 2).to(dtype) for t in (q, k, v)), causal=True)
        return out.transpose(1, 2).to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor):
    """Attention under a boolean mask (True = may attend), broadcast over heads."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
