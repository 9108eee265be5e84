"""Advantage estimators and DAPO's sample filters and length penalty: pure functions of
tensors and scalars, no gradients, no configuration (`trainers.dispatch` calls them as a preset of
`trainers.algorithms` asks).

Names carry their shape where it varies: B = episodes in the batch, T = token positions,
G = samples in a group, N = groups (`rewards_B`, `mask_BT`, `std_N`).

Sequence-level estimators (REINFORCE, RLOO, GRPO) take rewards either as `(N, G)` (row = the
G samples of one task) or as `(B,)` plus `group_ids_B (B,)` (any integer labels, groups of
unequal size allowed, e.g. after error episodes were dropped), and return `(B,)` in the same
order (row-major for the 2-D form, B = N * G). Broadcast them over tokens by the loss functions.

Token-level GAE takes `(B, T)` rewards, values and a loss mask and returns `(B, T)` advantages
and returns. On-policy distillation's `distill_advantages` takes the student's and the teacher's
`(B, T)` logprobs of the student's tokens and a mask, and returns `(B, T)` advantages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from rlvr.trainers.kernels.aggregation import as_bool_mask, check_bt


def _as_rewards(rewards: Tensor | Sequence[float]) -> Tensor:
    """`rewards` as a detached float tensor, `(N, G)` or `(B,)` as given."""
    r = torch.as_tensor(rewards)
    if not torch.is_floating_point(r):
        r = r.to(torch.float32)
    if r.dim() not in (1, 2):
        raise ValueError(f"rewards must be (num_groups, G) or (B,), got shape {tuple(r.shape)}")
    if not bool(torch.isfinite(r).all()):
        raise ValueError("rewards contain NaN or inf")
    return r.detach()


def _groups(rewards, group_ids_B) -> tuple[Tensor, Tensor, int]:
    """Flatten `rewards` (`(N, G)`, or `(B,)` with `group_ids_B (B,)`) to `(B,)` rewards plus
    each one's group index `(B,)` in 0..N-1, and the number of groups N."""
    r = _as_rewards(rewards)
    if r.dim() == 2:
        if group_ids_B is not None:
            raise ValueError("group_ids must be None when rewards are (num_groups, G)")
        rewards_NG = r
        N, G = rewards_NG.shape
        group_idx_B = torch.arange(N, device=rewards_NG.device).repeat_interleave(G)
        return rewards_NG.reshape(-1), group_idx_B, N
    if group_ids_B is None:
        raise ValueError("1-D rewards need group_ids (or pass rewards as (num_groups, G))")
    rewards_B = r
    ids_B = torch.as_tensor(group_ids_B, device=rewards_B.device)
    if ids_B.shape != rewards_B.shape or torch.is_floating_point(ids_B) or ids_B.dtype == torch.bool:
        raise ValueError(f"group_ids must be integers of shape {tuple(rewards_B.shape)}")
    uniq_N, group_idx_B = torch.unique(ids_B, return_inverse=True)
    return rewards_B, group_idx_B, int(uniq_N.numel())


def _group_sum(x_B: Tensor, group_idx_B: Tensor, N: int) -> Tensor:
    """Sum of `x_B (B,)` over each group: `(N,)`."""
    return torch.zeros(N, dtype=x_B.dtype, device=x_B.device).index_add_(0, group_idx_B, x_B)


def reinforce_advantages(rewards, baseline: bool = False) -> Tensor:
    """REINFORCE: the reward itself, or minus the batch mean when `baseline` (variance reduction,
    unbiased in the large-batch limit). Groups are ignored. `rewards`: `(N, G)` or `(B,)`;
    returns `(B,)`."""
    rewards_B = _as_rewards(rewards).reshape(-1)
    return rewards_B - rewards_B.mean() if baseline and rewards_B.numel() else rewards_B.clone()


def rloo_advantages(rewards, group_ids_B=None) -> Tensor:
    """RLOO (Ahmadian et al. 2024): r_i minus the mean of the *other* samples of its group,
    i.e. n/(n-1) * (r_i - group mean). A group of one has no baseline: advantage 0.
    `rewards`: `(N, G)`, or `(B,)` with `group_ids_B (B,)`; returns `(B,)`."""
    rewards_B, group_idx_B, N = _groups(rewards, group_ids_B)
    count_B = _group_sum(torch.ones_like(rewards_B), group_idx_B, N)[group_idx_B]
    sum_B = _group_sum(rewards_B, group_idx_B, N)[group_idx_B]
    loo_mean_B = (sum_B - rewards_B) / torch.clamp(count_B - 1, min=1)
    return torch.where(count_B > 1, rewards_B - loo_mean_B, torch.zeros_like(rewards_B))


def grpo_advantages(
    rewards,
    group_ids_B=None,
    scale_by_std: bool = True,
    std_unbiased: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """GRPO (Shao et al. 2024): (r_i - group mean) / (group std + eps). `std_unbiased` picks the
    sample std (n-1, as torch.std and TRL) or the population std (n). `scale_by_std=False` is
    Dr. GRPO (Liu et al. 2025): no division, which removes the bias toward easy/hard groups.
    A group of one (or with equal rewards) gets advantage 0.
    `rewards`: `(N, G)`, or `(B,)` with `group_ids_B (B,)`; returns `(B,)`."""
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    rewards_B, group_idx_B, N = _groups(rewards, group_ids_B)
    count_N = _group_sum(torch.ones_like(rewards_B), group_idx_B, N)
    mean_N = _group_sum(rewards_B, group_idx_B, N) / count_N
    # Equal rewards give exactly 0: their float mean may miss them by an ulp (seven 0.1s in float32),
    # which the division by std + eps (std 0) would blow up to ~1e-2 of noise advantage.
    high_N = torch.full_like(mean_N, -math.inf).scatter_reduce(0, group_idx_B, rewards_B, "amax")
    low_N = torch.full_like(mean_N, math.inf).scatter_reduce(0, group_idx_B, rewards_B, "amin")
    spread_B = (high_N > low_N)[group_idx_B]
    centred_B = torch.where(spread_B, rewards_B - mean_N[group_idx_B], torch.zeros_like(rewards_B))
    if not scale_by_std:
        return centred_B
    sq_N = _group_sum(centred_B * centred_B, group_idx_B, N)
    dof_N = count_N - 1 if std_unbiased else count_N
    std_N = torch.sqrt(torch.where(dof_N > 0, sq_N / torch.clamp(dof_N, min=1), torch.zeros_like(sq_N)))
    return centred_B / (std_N[group_idx_B] + eps)


def episode_rows(episode_ids_B) -> tuple[Tensor, Tensor]:
    """Rows that are segments of one episode (an agent's rewritten history, equal `episode_ids_B`)
    as one: `(first_B, index_B)`, where `first_B` (B,) bool marks each episode's first row and
    `index_B` (B,) maps every row to its episode, 0..E-1 in order of first rows. Estimators run on
    the E first rows, and `per_episode_B[index_B]` gives every segment its episode's advantage:
    a group's baseline counts each episode once, however many segments it has."""
    ids_B = torch.as_tensor(episode_ids_B)
    if ids_B.dim() != 1 or torch.is_floating_point(ids_B) or ids_B.dtype == torch.bool:
        raise ValueError(f"episode_ids must be (B,) integers, got {tuple(ids_B.shape)} {ids_B.dtype}")
    _, inverse_B = torch.unique(ids_B, return_inverse=True)
    B = ids_B.shape[0]
    first_of_E = torch.full((B,), B, dtype=torch.long).scatter_reduce(0, inverse_B, torch.arange(B), "amin")
    first_B = torch.zeros(B, dtype=torch.bool)
    first_B[first_of_E[first_of_E < B]] = True
    index_B = torch.cumsum(first_B.long(), 0)[first_of_E[inverse_B]] - 1
    return first_B, index_B


def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise to zero mean, unit variance over the masked entries; masked-out entries come back
    as 0. The variance is the unbiased one (n - 1), as TRL's and verl's `masked_whiten`; one
    entry divides by 1. `shift_mean=False` only rescales. Empty masks give zeros.
    `x` is any shape, e.g. `(B,)` sequence or `(B, T)` token advantages; `mask` (default: all
    set) and the result have its shape. The mean and variance are scalars over all entries."""
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
    rewards_BT: Tensor, values_BT: Tensor, mask_BT: Tensor, gamma: float = 1.0, lam: float = 0.95
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over token positions.

    `rewards_BT (B, T)`: put each turn's reward at that turn's last model token (plus any
    per-token KL penalty), so a token is credited with the rewards at and after it only;
    `values_BT (B, T)`: the value head's output per token; `mask_BT (B, T)`: 1 on model tokens.

    Masked positions (padding, and the environment's tokens between turns) are *not time steps*:
    the recursion jumps from one model token to the next, so V(next) is the value at the next
    model token and no discount is spent on env tokens. A reward placed on a masked position is
    credited, undiscounted, to the model token before it (the action that led to it); one before
    the first model token of its row is an error. After the last model token the episode ends
    (V = 0). Returns `(advantages_BT, returns_BT)`, both `(B, T)`,
    `returns = advantages + values`, both 0 off the mask.
    """
    for name, v in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    if rewards_BT.dim() != 2:
        raise ValueError(f"rewards must be (B, T), got shape {tuple(rewards_BT.shape)}")
    check_bt("values", values_BT, rewards_BT)
    check_bt("mask", mask_BT, rewards_BT)
    if not bool(torch.isfinite(rewards_BT).all()):
        raise ValueError("rewards contain NaN or inf")
    dtype = torch.promote_types(rewards_BT.dtype, values_BT.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float32
    r_BT, v_BT, m_BT = rewards_BT.to(dtype), values_BT.detach().to(dtype), as_bool_mask(mask_BT)
    B, T = r_BT.shape
    adv_BT = torch.zeros(B, T, dtype=dtype, device=r_BT.device)
    next_value_B = torch.zeros(B, dtype=dtype, device=r_BT.device)
    next_adv_B = torch.zeros_like(next_value_B)
    pending_B = torch.zeros_like(next_value_B)  # rewards seen on masked positions after this one
    for t in range(T - 1, -1, -1):
        mt_B = m_BT[:, t]
        vt_B = torch.where(mt_B, v_BT[:, t], torch.zeros_like(next_value_B))  # garbage off-mask can't leak
        delta_B = r_BT[:, t] + pending_B + gamma * next_value_B - vt_B
        a_B = delta_B + gamma * lam * next_adv_B
        adv_BT[:, t] = torch.where(mt_B, a_B, torch.zeros_like(a_B))
        next_value_B = torch.where(mt_B, vt_B, next_value_B)
        next_adv_B = torch.where(mt_B, a_B, next_adv_B)
        pending_B = torch.where(mt_B, torch.zeros_like(pending_B), pending_B + r_BT[:, t])
    if bool((pending_B != 0).any()):
        rows = torch.nonzero(pending_B != 0).flatten().tolist()
        raise ValueError(f"rows {rows} have rewards before their first model token (mask 0)")
    returns_BT = torch.where(m_BT, adv_BT + torch.where(m_BT, v_BT, torch.zeros_like(v_BT)), torch.zeros_like(adv_BT))
    return adv_BT, returns_BT


# --- DAPO's sample filters (Yu et al. 2025) -------------------------------------------------


def dynamic_sampling_keep(rewards, group_ids_B=None, atol: float = 0.0) -> Tensor:
    """Dynamic sampling: keep only groups whose rewards are not all equal (all-correct or
    all-wrong groups have zero advantage and only dilute the batch). Returns a bool mask over the
    input's group axis: `(N,)` for `(N, G)` rewards, `(B,)` (per episode: does its group have
    signal?) for `(B,)` rewards with `group_ids_B (B,)`. Groups of one are dropped."""
    rewards_B, group_idx_B, N = _groups(rewards, group_ids_B)
    gmax_N = torch.full((N,), -torch.inf, dtype=rewards_B.dtype, device=rewards_B.device).scatter_reduce(
        0, group_idx_B, rewards_B, reduce="amax"
    )
    gmin_N = torch.full((N,), torch.inf, dtype=rewards_B.dtype, device=rewards_B.device).scatter_reduce(
        0, group_idx_B, rewards_B, reduce="amin"
    )
    keep_N = (gmax_N - gmin_N) > atol
    return keep_N if _as_rewards(rewards).dim() == 2 else keep_N[group_idx_B]


def overlong_filter(mask_BT: Tensor, truncated_B) -> Tensor:
    """Overlong filtering: zero the loss mask `mask_BT (B, T)` of episodes cut off at the length
    limit, so a truncated (unfinished) answer is not punished as wrong. `truncated_B`: `(B,)`
    bools (the last turn hit the token budget, or a multi-turn episode hit the context limit:
    `Batch.truncated`). Their rewards still count in their group's statistics. Returns `(B, T)`
    of `mask_BT`'s dtype."""
    m_BT = as_bool_mask(mask_BT)
    if m_BT.dim() != 2:
        raise ValueError(f"mask must be (B, T), got shape {tuple(m_BT.shape)}")
    tr_B = torch.as_tensor(truncated_B, device=mask_BT.device)
    if tr_B.shape != (m_BT.shape[0],):
        raise ValueError(f"truncated must have shape ({m_BT.shape[0]},), got {tuple(tr_B.shape)}")
    keep_B = ~tr_B.bool()
    if mask_BT.dtype == torch.bool:
        return mask_BT & keep_B.unsqueeze(-1)
    return mask_BT * keep_B.unsqueeze(-1).to(mask_BT.dtype)


def overlong_penalty(lengths: Tensor, max_length: float, buffer: float, factor: float = 1.0) -> Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13): 0 up to `max_length - buffer`
    tokens, then falling linearly to `-factor` at `max_length` (and staying there beyond), so
    answers that approach the budget are discouraged before they are cut. `lengths` is any shape
    (`(B,)` per episode, or `(B, T)` per turn as `turn_ends` gives); the result has its shape."""
    if not 0 < buffer <= max_length:
        raise ValueError(f"overlong buffer must be in (0, max_length={max_length}], got {buffer}")
    over = (torch.as_tensor(lengths).to(torch.float32) - (max_length - buffer)) / buffer
    return -factor * over.clamp(0.0, 1.0)


# --- on-policy distillation (Agarwal et al. 2024, GKD; Thinking Machines 2025) ---------------


@torch.no_grad()
def distill_advantages(
    student_logprobs_BT: Tensor, teacher_logprobs_BT: Tensor, mask_BT: Tensor, gamma: float = 0.0
) -> Tensor:
    """Per-token advantages of on-policy distillation: the student sampled x_t, and

        r_t = log pi_teacher(x_t | x_<t) - log pi_student(x_t | x_<t)

    is minus the one-sample (k1) estimate of the reverse KL(pi_student || pi_teacher) at token t,
    a dense reward that is high where the teacher likes the student's token more than the student
    does. The advantage is the discounted sum over the row's later model tokens,

        A_t = sum_{s >= t} gamma^(n_s - n_t) r_s     (n = index among the row's model tokens),

    so `gamma` 0 (the default, the blog's "discount 0") gives A_t = r_t, and `gamma` 1 credits a
    token also with the KL of everything it led to (a lower-bias, higher-variance estimate of the
    sequence-level reverse KL's gradient). Masked positions (prompt, environment tokens, padding)
    are not time steps, as in `gae`, and get 0. All of `student_logprobs_BT`,
    `teacher_logprobs_BT`, `mask_BT` are `(B, T)`; returns `(B, T)` of their float dtype."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if student_logprobs_BT.dim() != 2:
        raise ValueError(f"student logprobs must be (B, T), got shape {tuple(student_logprobs_BT.shape)}")
    check_bt("teacher_logprobs", teacher_logprobs_BT, student_logprobs_BT)
    check_bt("mask", mask_BT, student_logprobs_BT)
    m_BT = as_bool_mask(mask_BT)
    dtype = torch.promote_types(student_logprobs_BT.dtype, teacher_logprobs_BT.dtype)
    r_BT = (teacher_logprobs_BT.to(dtype) - student_logprobs_BT.to(dtype)).detach()
    if not bool(torch.isfinite(r_BT[m_BT]).all()):
        raise ValueError("student or teacher logprobs are NaN or inf on model tokens")
    r_BT = torch.where(m_BT, r_BT, torch.zeros_like(r_BT))
    if gamma == 0.0:
        return r_BT
    adv_BT = torch.zeros_like(r_BT)
    running_B = torch.zeros_like(r_BT[:, 0])
    for t in range(r_BT.shape[1] - 1, -1, -1):  # right to left, skipping masked positions
        running_B = torch.where(m_BT[:, t], r_BT[:, t] + gamma * running_B, running_B)
        adv_BT[:, t] = torch.where(m_BT[:, t], running_B, torch.zeros_like(running_B))
    return adv_BT
