"""PPO's value loss, optionally clipped around the values at rollout time: a config-free kernel."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from trainers.aggregation import as_bool_mask, check_bt, masked_zero


@dataclass
class ValueLossOutput:
    loss: Tensor  # (B, T) per-token loss, 0 off the mask
    clipped: Tensor  # (B, T) bool: the clipped branch won (no gradient from this token)


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip_eps: float | None = 0.2,
) -> ValueLossOutput:
    """0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, +eps) - R)^2) per token, as in PPO
    implementations (OpenAI baselines, TRL): the value may not profit from moving more than `eps`
    away from its rollout-time estimate in one update. `clip_eps=None` gives the plain squared
    error 0.5 * (V - R)^2. Reduce with `aggregate_loss` like the policy loss."""
    if not isinstance(values, Tensor) or values.dim() != 2:
        raise ValueError(f"values must be a (B, T) tensor, got {getattr(values, 'shape', values)}")
    check_bt("old_values", old_values, values)
    check_bt("returns", returns, values)
    check_bt("mask", mask, values)
    if clip_eps is not None and not clip_eps > 0:
        raise ValueError(f"value clip_eps must be > 0 or None, got {clip_eps}")
    m = as_bool_mask(mask)
    v = values.float() if values.dtype in (torch.float16, torch.bfloat16) else values
    ret = returns.detach().to(v.dtype)
    loss = 0.5 * (v - ret).square()
    clipped = torch.zeros_like(m)
    if clip_eps is not None:
        old = old_values.detach().to(v.dtype)
        v_clipped = old + (v - old).clamp(-clip_eps, clip_eps)
        loss_clipped = 0.5 * (v_clipped - ret).square()
        clipped = (loss_clipped > loss) & m
        loss = torch.maximum(loss, loss_clipped)
    return ValueLossOutput(masked_zero(loss, m), clipped)
