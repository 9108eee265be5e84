"""The calls a preset makes of the config-free kernels (`trainers.kernels`): what the training step
calls with its `AlgoConfig` (`trainers.algorithms`, the page of what each algorithm is).

- the group and sample filters: `keep_groups` (DAPO's dynamic sampling) and `filter_loss_mask`
  (overlong filtering); reward shaping: `shape_rewards` (DAPO's soft overlong penalty);
- advantages: `sequence_advantages` (REINFORCE, RLOO, GRPO), `token_advantages` (GAE) and
  `teacher_advantages` (on-policy distillation), each whitened if the preset asks;
- the policy objective: `compute_policy_loss` (the preset's policy loss, the rollout correction's
  weights, the KL term in the loss and the entropy term).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.trainers.algorithms import AlgoConfig
from rlvr.trainers.kernels.advantages import (
    distill_advantages,
    dynamic_sampling_keep,
    episode_rows,
    gae,
    grpo_advantages,
    overlong_filter,
    overlong_penalty,
    reinforce_advantages,
    rloo_advantages,
    whiten,
)
from rlvr.trainers.kernels.aggregation import as_bool_mask, check_bt, masked_zero, turn_ends
from rlvr.trainers.kernels.kl import kl_estimate
from rlvr.trainers.kernels.policy_loss import PolicyLossOutput, cispo_loss, clipped_policy_loss, pg_loss


def keep_groups(algo: AlgoConfig, rewards_B: Tensor, group_ids_B: Tensor) -> Tensor:
    """Per episode, whether its group trains: all do, or (dynamic sampling) those whose rewards
    differ. Run on the verifier's rewards, before any shaping (DAPO filters on accuracy)."""
    if not algo.dynamic_sampling or rewards_B.numel() == 0:
        return torch.ones(rewards_B.shape, dtype=torch.bool)
    return dynamic_sampling_keep(rewards_B, group_ids_B)


def filter_loss_mask(algo: AlgoConfig, loss_mask_BT: Tensor, truncated_B: Tensor) -> Tensor:
    """Overlong filtering: truncated episodes take no part in the loss."""
    return overlong_filter(loss_mask_BT, truncated_B) if algo.overlong_filtering else loss_mask_BT


def shape_rewards(
    algo: AlgoConfig, rewards_B: Tensor, turn_rewards_BT: Tensor, loss_mask_BT: Tensor
) -> tuple[Tensor, Tensor]:
    """DAPO's soft overlong penalty, per model turn (each turn has its own `max_tokens` budget;
    a single-turn episode is DAPO's case exactly): added to the turn's reward on its last model
    token, and to the episode's total. Needs `resolve`d `overlong_max_length`. Pass the mask
    before overlong filtering: lengths are what the model generated."""
    if algo.overlong_buffer_frac == 0:
        return rewards_B, turn_rewards_BT
    if algo.overlong_max_length is None:
        raise ValueError(f"{algo.name}: the overlong penalty needs overlong_max_length (call resolve)")
    check_bt("turn_rewards", turn_rewards_BT, loss_mask_BT)
    ends_BT, lengths_BT = turn_ends(loss_mask_BT)
    L = algo.overlong_max_length
    penalty_BT = overlong_penalty(lengths_BT, L, algo.overlong_buffer_frac * L, algo.overlong_penalty_factor)
    penalty_BT = torch.where(ends_BT, penalty_BT.to(turn_rewards_BT.dtype), torch.zeros_like(turn_rewards_BT))
    return rewards_B + penalty_BT.sum(dim=1).to(rewards_B.dtype), turn_rewards_BT + penalty_BT


def sequence_advantages(
    algo: AlgoConfig, rewards_B: Tensor, group_ids_B: Tensor | None = None, episode_ids_B: Tensor | None = None
) -> Tensor:
    """The preset's sequence-level estimator, then whitening if asked. Returns `(B,)`.
    Rewards may also be `(num_groups, G)` without ids. For ``gae`` use `token_advantages`.
    `episode_ids_B`: rows with one id are segments of one agent episode, counted once
    (`trainers.kernels.advantages.episode_rows`: each gets its first row's advantage)."""
    if episode_ids_B is not None and group_ids_B is not None:
        first_B, index_B = episode_rows(episode_ids_B)
        if not bool(first_B.all()):
            return sequence_advantages(algo, rewards_B[first_B], group_ids_B[first_B])[index_B]
    if algo.advantage == "reinforce":
        advantages_B = reinforce_advantages(rewards_B, baseline=algo.batch_baseline)
    elif algo.advantage == "rloo":
        advantages_B = rloo_advantages(rewards_B, group_ids_B)
    elif algo.advantage == "grpo":
        advantages_B = grpo_advantages(rewards_B, group_ids_B, algo.scale_by_std, algo.std_unbiased, algo.std_eps)
    else:
        raise ValueError(f"advantage {algo.advantage!r} is token-level: use token_advantages or teacher_advantages")
    return whiten(advantages_B) if algo.whiten_advantages else advantages_B


def token_advantages(algo: AlgoConfig, rewards_BT: Tensor, values_BT: Tensor, mask_BT: Tensor) -> tuple[Tensor, Tensor]:
    """PPO's advantages: `gae` with the preset's gamma/lambda over per-token rewards (each turn's
    on its last model token), whitened over the masked tokens if asked (the returns, the value
    targets, never are). Returns `(advantages_BT, returns_BT)`."""
    advantages_BT, returns_BT = gae(rewards_BT, values_BT, mask_BT, algo.gamma, algo.lam)
    return (whiten(advantages_BT, mask_BT) if algo.whiten_advantages else advantages_BT), returns_BT


def teacher_advantages(
    algo: AlgoConfig, student_logprobs_BT: Tensor, teacher_logprobs_BT: Tensor, mask_BT: Tensor
) -> Tensor:
    """On-policy distillation's advantages (`teacher_kl`): per token, the teacher's logprob minus
    the student's, summed over later model tokens with the preset's `gamma` (0: the token's own;
    formulas in `trainers.kernels.advantages.distill_advantages`), whitened over the masked tokens if
    asked. The student's logprobs are those of the weights that sampled (before the update).
    Returns `(B, T)`."""
    advantages_BT = distill_advantages(student_logprobs_BT, teacher_logprobs_BT, mask_BT, algo.gamma)
    return whiten(advantages_BT, mask_BT) if algo.whiten_advantages else advantages_BT


def compute_policy_loss(
    algo: AlgoConfig,
    logprobs_BT: Tensor,
    old_logprobs_BT: Tensor | None,
    advantages: Tensor,
    mask_BT: Tensor,
    ref_logprobs_BT: Tensor | None = None,
    entropy_BT: Tensor | None = None,
    is_weights_BT: Tensor | None = None,
) -> PolicyLossOutput:
    """The preset's whole per-token policy objective: its policy loss (times `is_weights_BT`,
    the rollout correction's, when given), plus `kl_coef * KL` when the KL goes in the loss (needs
    `ref_logprobs_BT`), minus `entropy_coef * entropy` (needs `entropy_BT` when the coef is set).
    `advantages` is `(B,)` or `(B, T)`. Reduce the result's `loss` with
    `aggregate_loss(..., algo.aggregation, ..., algo.constant_length)`."""
    if algo.loss_type == "clipped":
        out = clipped_policy_loss(
            logprobs_BT,
            old_logprobs_BT,
            advantages,
            mask_BT,
            algo.clip_eps_low,
            algo.clip_eps_high,
            algo.dual_clip,
            algo.ratio_level,
        )
    elif algo.loss_type == "cispo":
        out = cispo_loss(logprobs_BT, old_logprobs_BT, advantages, mask_BT, algo.clip_eps_low, algo.clip_eps_high)
    else:
        out = pg_loss(logprobs_BT, advantages, mask_BT)
    loss_BT, m = out.loss, as_bool_mask(mask_BT)
    if is_weights_BT is not None:
        check_bt("is_weights", is_weights_BT, logprobs_BT)
        loss_BT = loss_BT * is_weights_BT.detach().to(loss_BT.dtype)
    if algo.kl_in_loss:
        if ref_logprobs_BT is None:
            raise ValueError(f"{algo.name}: kl_placement='loss' with kl_coef > 0 needs ref_logprobs")
        kl_BT = kl_estimate(logprobs_BT.to(loss_BT.dtype), ref_logprobs_BT.to(loss_BT.dtype), m, algo.kl_estimator)
        loss_BT = loss_BT + algo.kl_coef * kl_BT
    if algo.entropy_coef > 0:
        if entropy_BT is None:
            raise ValueError(f"{algo.name}: entropy_coef > 0 needs the per-token entropy")
        check_bt("entropy", entropy_BT, logprobs_BT)
        loss_BT = loss_BT - algo.entropy_coef * entropy_BT.to(loss_BT.dtype)
    out.loss = masked_zero(loss_BT, m)
    return out
