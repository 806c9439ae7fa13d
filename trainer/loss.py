"""The drafter's loss: KL to the target's soft labels plus CE to its top token, per position.

Block position i (1..S-1) drafts the token the target predicts at anchor + i - 1. Position
weights decay along the block (`decay ** (i-1)`: later tokens only count if earlier ones are
accepted), and with `streak_alpha > 0` a share of the weight follows the drafter's own odds of
reaching position i (the product of its probabilities for the target's earlier top tokens,
detached): the acceptance-aware "streak" weighting.

    loss, stats = draft_loss(drafter_logits, target_logits, config)
    stats == {"accuracy": 0.41, "avg_streak": 1.7}
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import Config


def position_weights(log_q_top: torch.Tensor, config: Config) -> torch.Tensor:
    """(..., S-1) weights: decay along the block, blended with the acceptance odds."""
    steps = torch.arange(log_q_top.shape[-1], device=log_q_top.device, dtype=log_q_top.dtype)
    weights = config.loss.decay**steps
    if config.loss.streak_alpha > 0:
        reach = torch.exp(torch.cumsum(log_q_top.detach(), -1) - log_q_top.detach())
        weights = weights * ((1 - config.loss.streak_alpha) + config.loss.streak_alpha * reach)
    return weights.expand_as(log_q_top)


def draft_loss(
    drafter_logits: torch.Tensor, target_logits: torch.Tensor, config: Config
) -> tuple[torch.Tensor, dict[str, float]]:
    """drafter_logits (B, A, S, V), target_logits (B, A, S-1, V) at the drafted positions."""
    log_q = F.log_softmax(drafter_logits[:, :, 1:].float(), dim=-1)
    log_p = F.log_softmax(target_logits.float(), dim=-1)
    top = log_p.argmax(-1, keepdim=True)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    log_q_top = log_q.gather(-1, top).squeeze(-1)
    weights = position_weights(log_q_top, config)
    per_position = config.loss.kl_weight * kl - config.loss.ce_weight * log_q_top
    loss = (weights * per_position).sum() / weights.sum()
    with torch.no_grad():
        match = (log_q.argmax(-1, keepdim=True) == top).squeeze(-1).float()
        streak = torch.cumprod(match, dim=-1).sum(-1)
    return loss, {"accuracy": match.mean().item(), "avg_streak": streak.mean().item()}
