"""Advantage estimators and DAPO's sample filters and length penalty: pure functions of
tensors and scalars, no gradients, no configuration (`trainers.algorithms` picks and calls them).

Sequence-level estimators (REINFORCE, RLOO, GRPO) take rewards either as `(num_groups, G)`
(row = the G samples of one task) or as `(B,)` plus `group_ids (B,)` (any integer labels, groups
of unequal size allowed, e.g. after error episodes were dropped), and return `(B,)` in the same
order (row-major for the 2-D form). Broadcast them over tokens by the loss functions.

Token-level GAE takes `(B, T)` rewards, values and a loss mask and returns `(B, T)` advantages
and returns.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from trainers.aggregation import as_bool_mask, check_bt


def _as_rewards(rewards: Tensor | Sequence[float]) -> Tensor:
    r = torch.as_tensor(rewards)
    if not torch.is_floating_point(r):
        r = r.to(torch.float32)
    if r.dim() not in (1, 2):
        raise ValueError(f"rewards must be (num_groups, G) or (B,), got shape {tuple(r.shape)}")
    if not bool(torch.isfinite(r).all()):
        raise ValueError("rewards contain NaN or inf")
    return r.detach()


def _groups(rewards, group_ids) -> tuple[Tensor, Tensor, int]:
    """Flatten to `(B,)` rewards plus each one's group index in 0..num_groups-1."""
    r = _as_rewards(rewards)
    if r.dim() == 2:
        if group_ids is not None:
            raise ValueError("group_ids must be None when rewards are (num_groups, G)")
        ng, g = r.shape
        return r.reshape(-1), torch.arange(ng, device=r.device).repeat_interleave(g), ng
    if group_ids is None:
        raise ValueError("1-D rewards need group_ids (or pass rewards as (num_groups, G))")
    ids = torch.as_tensor(group_ids, device=r.device)
    if ids.shape != r.shape or torch.is_floating_point(ids) or ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be integers of shape {tuple(r.shape)}")
    uniq, inverse = torch.unique(ids, return_inverse=True)
    return r, inverse, int(uniq.numel())


def _group_sum(x: Tensor, idx: Tensor, ng: int) -> Tensor:
    return torch.zeros(ng, dtype=x.dtype, device=x.device).index_add_(0, idx, x)


def reinforce_advantages(rewards, baseline: bool = False) -> Tensor:
    """REINFORCE: the reward itself, or minus the batch mean when `baseline` (variance reduction,
    unbiased in the large-batch limit). Groups are ignored."""
    r = _as_rewards(rewards).reshape(-1)
    return r - r.mean() if baseline and r.numel() else r.clone()


def rloo_advantages(rewards, group_ids=None) -> Tensor:
    """RLOO (Ahmadian et al. 2024): r_i minus the mean of the *other* samples of its group,
    i.e. n/(n-1) * (r_i - group mean). A group of one has no baseline: advantage 0."""
    r, idx, ng = _groups(rewards, group_ids)
    n = _group_sum(torch.ones_like(r), idx, ng)[idx]
    s = _group_sum(r, idx, ng)[idx]
    loo_mean = (s - r) / torch.clamp(n - 1, min=1)
    return torch.where(n > 1, r - loo_mean, torch.zeros_like(r))


def grpo_advantages(
    rewards,
    group_ids=None,
    scale_by_std: bool = True,
    std_unbiased: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """GRPO (Shao et al. 2024): (r_i - group mean) / (group std + eps). `std_unbiased` picks the
    sample std (n-1, as torch.std and TRL) or the population std (n). `scale_by_std=False` is
    Dr. GRPO (Liu et al. 2025): no division, which removes the bias toward easy/hard groups.
    A group of one (or with equal rewards) gets advantage 0."""
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    r, idx, ng = _groups(rewards, group_ids)
    n = _group_sum(torch.ones_like(r), idx, ng)
    mean = _group_sum(r, idx, ng) / n
    centred = r - mean[idx]
    if not scale_by_std:
        return centred
    sq = _group_sum(centred * centred, idx, ng)
    dof = n - 1 if std_unbiased else n
    std = torch.sqrt(torch.where(dof > 0, sq / torch.clamp(dof, min=1), torch.zeros_like(sq)))
    return centred / (std[idx] + eps)


def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise to zero mean, unit variance over the masked entries; masked-out entries come back
    as 0. The variance is the unbiased one (n - 1), as TRL's and verl's `masked_whiten`; one
    entry divides by 1. `shift_mean=False` only rescales. Empty masks give zeros."""
    if mask is None:
        mask = torch.ones_like(x, dtype=torch.bool)
    if mask.shape != x.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(x.shape)}")
    m = as_bool_mask(mask)
    count = m.sum().clamp(min=1).to(x.dtype)
    xz = torch.where(m, x, torch.zeros_like(x))
    mean = xz.sum() / count
    var = (torch.where(m, x - mean, torch.zeros_like(x)) ** 2).sum() / (count - 1).clamp(min=1)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(m, out, torch.zeros_like(x))


@torch.no_grad()
def gae(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 0.95
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over token positions.

    `rewards (B, T)`: put each turn's reward at that turn's last model token (plus any per-token
    KL penalty), so a token is credited with the rewards at and after it only; `values (B, T)`:
    the value head's output per token; `mask (B, T)`: 1 on model tokens.

    Masked positions (padding, and the environment's tokens between turns) are *not time steps*:
    the recursion jumps from one model token to the next, so V(next) is the value at the next
    model token and no discount is spent on env tokens. A reward placed on a masked position is
    credited, undiscounted, to the model token before it (the action that led to it); one before
    the first model token of its row is an error. After the last model token the episode ends
    (V = 0). Returns `(advantages, returns)`, `returns = advantages + values`, both 0 off the mask.
    """
    for name, v in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (B, T), got shape {tuple(rewards.shape)}")
    check_bt("values", values, rewards)
    check_bt("mask", mask, rewards)
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("rewards contain NaN or inf")
    dtype = torch.promote_types(rewards.dtype, values.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float32
    r, v, m = rewards.to(dtype), values.detach().to(dtype), as_bool_mask(mask)
    B, T = r.shape
    adv = torch.zeros(B, T, dtype=dtype, device=r.device)
    next_value = torch.zeros(B, dtype=dtype, device=r.device)
    next_adv = torch.zeros_like(next_value)
    pending = torch.zeros_like(next_value)  # rewards seen on masked positions after this one
    for t in range(T - 1, -1, -1):
        mt = m[:, t]
        vt = torch.where(mt, v[:, t], torch.zeros_like(next_value))  # garbage off-mask can't leak
        delta = r[:, t] + pending + gamma * next_value - vt
        a = delta + gamma * lam * next_adv
        adv[:, t] = torch.where(mt, a, torch.zeros_like(a))
        next_value = torch.where(mt, vt, next_value)
        next_adv = torch.where(mt, a, next_adv)
        pending = torch.where(mt, torch.zeros_like(pending), pending + r[:, t])
    if bool((pending != 0).any()):
        rows = torch.nonzero(pending != 0).flatten().tolist()
        raise ValueError(f"rows {rows} have rewards before their first model token (mask 0)")
    returns = torch.where(m, adv + torch.where(m, v, torch.zeros_like(v)), torch.zeros_like(adv))
    return adv, returns


# --- DAPO's sample filters (Yu et al. 2025) -------------------------------------------------


def dynamic_sampling_keep(rewards, group_ids=None, atol: float = 0.0) -> Tensor:
    """Dynamic sampling: keep only groups whose rewards are not all equal (all-correct or
    all-wrong groups have zero advantage and only dilute the batch). Returns a bool mask over the
    input's group axis: `(num_groups,)` for `(num_groups, G)` rewards, `(B,)` (per episode: does
    its group have signal?) for `(B,)` rewards with `group_ids`. Groups of one are dropped."""
    r, idx, ng = _groups(rewards, group_ids)
    gmax = torch.full((ng,), -torch.inf, dtype=r.dtype, device=r.device).scatter_reduce(
        0, idx, r, reduce="amax"
    )
    gmin = torch.full((ng,), torch.inf, dtype=r.dtype, device=r.device).scatter_reduce(
        0, idx, r, reduce="amin"
    )
    keep = (gmax - gmin) > atol
    return keep if _as_rewards(rewards).dim() == 2 else keep[idx]


def overlong_filter(mask: Tensor, truncated) -> Tensor:
    """Overlong filtering: zero the loss mask of episodes cut off at the length limit, so a
    truncated (unfinished) answer is not punished as wrong. `truncated`: `(B,)` bools (the last
    turn hit the token budget, or a multi-turn episode hit the context limit: `Batch.truncated`).
    Their rewards still count in their group's statistics."""
    m = as_bool_mask(mask)
    if m.dim() != 2:
        raise ValueError(f"mask must be (B, T), got shape {tuple(m.shape)}")
    tr = torch.as_tensor(truncated, device=mask.device)
    if tr.shape != (m.shape[0],):
        raise ValueError(f"truncated must have shape ({m.shape[0]},), got {tuple(tr.shape)}")
    keep = (~tr.bool()).unsqueeze(-1)
    return mask * keep.to(mask.dtype) if mask.dtype != torch.bool else mask & keep


def overlong_penalty(lengths: Tensor, max_length: float, buffer: float, factor: float = 1.0) -> Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13): 0 up to `max_length - buffer`
    tokens, then falling linearly to `-factor` at `max_length` (and staying there beyond), so
    answers that approach the budget are discouraged before they are cut. Same shape as
    `lengths`."""
    if not 0 < buffer <= max_length:
        raise ValueError(f"overlong buffer must be in (0, max_length={max_length}], got {buffer}")
    over = (torch.as_tensor(lengths).to(torch.float32) - (max_length - buffer)) / buffer
    return -factor * over.clamp(0.0, 1.0)
