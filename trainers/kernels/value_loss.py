"""PPO's value loss, optionally clipped around the values at rollout time: a config-free kernel.

Names carry their shape (B = episodes in the batch, T = token positions: `values_BT`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.trainers.kernels.aggregation import as_bool_mask, check_bt, masked_zero


@dataclass
class ValueLossOutput:
    loss: Tensor  # (B, T) per-token loss, 0 off the mask
    clipped: Tensor  # (B, T) bool: the clipped branch won (no gradient from this token)


def value_loss(
    values_BT: Tensor,
    old_values_BT: Tensor,
    returns_BT: Tensor,
    mask_BT: Tensor,
    clip_eps: float | None = 0.2,
) -> ValueLossOutput:
    """0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, +eps) - R)^2) per token, as in PPO
    implementations (OpenAI baselines, TRL): the value may not profit from moving more than `eps`
    away from its rollout-time estimate in one update. `clip_eps=None` gives the plain squared
    error 0.5 * (V - R)^2. All tensors are `(B, T)`, the output's too. Reduce with
    `aggregate_loss` like the policy loss."""
    if not isinstance(values_BT, Tensor) or values_BT.dim() != 2:
        raise ValueError(f"values must be a (B, T) tensor, got {getattr(values_BT, 'shape', values_BT)}")
    check_bt("old_values", old_values_BT, values_BT)
    check_bt("returns", returns_BT, values_BT)
    check_bt("mask", mask_BT, values_BT)
    if clip_eps is not None and not clip_eps > 0:
        raise ValueError(f"value clip_eps must be > 0 or None, got {clip_eps}")
    m_BT = as_bool_mask(mask_BT)
    v_BT = values_BT.float() if values_BT.dtype in (torch.float16, torch.bfloat16) else values_BT
    ret_BT = returns_BT.detach().to(v_BT.dtype)
    loss_BT = 0.5 * (v_BT - ret_BT).square()
    clipped_BT = torch.zeros_like(m_BT)
    if clip_eps is not None:
        old_BT = old_values_BT.detach().to(v_BT.dtype)
        v_clipped_BT = old_BT + (v_BT - old_BT).clamp(-clip_eps, clip_eps)
        loss_clipped_BT = 0.5 * (v_clipped_BT - ret_BT).square()
        clipped_BT = (loss_clipped_BT > loss_BT) & m_BT
        loss_BT = torch.maximum(loss_BT, loss_clipped_BT)
    return ValueLossOutput(masked_zero(loss_BT, m_BT), clipped_BT)
