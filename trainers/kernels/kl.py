"""KL to a frozen reference model, and the entropy term: config-free kernels.

Per-token estimates from `x = log pi(y_t) - log pi_ref(y_t)` on tokens sampled from the policy
pi (Schulman, "Approximating KL divergence", 2020):
- k1 = x                     an unbiased estimate of KL(pi || pi_ref), high variance, can be < 0;
- k2 = 0.5 * x**2            biased, low variance, >= 0;
- k3 = exp(-x) - 1 + x       an unbiased estimate of KL(pi || pi_ref), low variance, >= 0 (GRPO's);
  clamped to [-10, 10] on output (and x to [-20, 20] on input), as verl's and OpenRLHF's
  `low_var_kl`, so one token the reference finds absurd cannot dominate a step.
Their *values* estimate KL(pi || pi_ref): that is what the metrics and the KL-in-reward placement
use. Their *gradients*, when the estimate is put in the loss and differentiated through log pi
on samples from pi, are something else (expectations over y ~ pi, d log pi = grad log pi(y)):
- k1 in the loss: E[grad log pi] = 0, no expected gradient at all (only noise);
  `trainers.algorithms` warns when a config asks for it;
- k2 in the loss: E[x grad log pi] = grad KL(pi || pi_ref);
- k3 in the loss: E[(1 - pi_ref/pi) grad log pi] = -E_ref[grad log pi] = grad KL(pi_ref || pi),
  the reverse direction (GRPO's k3-in-loss optimises KL(pi_ref || pi); Tang & Munos 2025).
Where it goes is the preset's `kl_placement`: ``reward`` subtracts `coef * kl` from the reward
(`kl_penalized_rewards`, computed without gradient), ``loss`` adds `coef * kl` per token to the loss.

Names carry their shape where it varies (B = episodes in the batch, T = token positions:
`logprobs_BT`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.trainers.kernels.aggregation import as_bool_mask, check_bt, masked_sum
from rlvr.trainers.kernels.log_ratio import clamp_log_ratio
from rlvr.trainers.kernels.names import KL_ESTIMATORS

_MAX_K3 = 10.0  # verl / OpenRLHF clamp k3 to [-10, 10] on output


def kl_estimate(
    logprobs_BT: Tensor, ref_logprobs_BT: Tensor, mask_BT: Tensor | None = None, estimator: str = "k3"
) -> Tensor:
    """Per-token estimate `(B, T)` of KL(pi || pi_ref) from `logprobs_BT` and `ref_logprobs_BT`
    (both `(B, T)`); 0 where `mask_BT` is 0. Differentiable in `logprobs_BT` (detach them yourself
    for the reward placement); see the module docstring for what the gradient of each estimator
    is. k3 has zero gradient where its output clamp acts."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")
    check_bt("ref_logprobs", ref_logprobs_BT, logprobs_BT)
    log_ratio_BT = logprobs_BT - ref_logprobs_BT.detach()
    if mask_BT is not None:
        check_bt("mask", mask_BT, logprobs_BT)
        log_ratio_BT = torch.where(as_bool_mask(mask_BT), log_ratio_BT, torch.zeros_like(log_ratio_BT))
    if estimator == "k1":
        return log_ratio_BT
    if estimator == "k2":
        return 0.5 * log_ratio_BT.square()
    lr_BT = clamp_log_ratio(log_ratio_BT)  # exp(-x) would overflow float32 in k3 and its gradient
    k3_BT = torch.expm1(-lr_BT) + lr_BT  # exp(-x) - 1 + x; expm1 keeps precision near x = 0
    return k3_BT.clamp(-_MAX_K3, _MAX_K3)


@torch.no_grad()
def kl_penalized_rewards(rewards: Tensor, kl_BT: Tensor, mask_BT: Tensor, coef: float) -> Tensor:
    """KL in the reward, from the per-token `kl_BT (B, T)` on `mask_BT (B, T)`. `rewards (B, T)`
    per token (PPO): `r - coef * kl` on masked tokens. `rewards (B,)` per sequence
    (REINFORCE/RLOO/GRPO): `r - coef * sum_t kl` over the sequence's model tokens. The result has
    the shape of `rewards`. No gradient flows: the penalty is part of the return, not of the loss."""
    if coef < 0:
        raise ValueError(f"KL coefficient must be >= 0, got {coef}")
    check_bt("mask", mask_BT, kl_BT)
    kl_BT = torch.where(as_bool_mask(mask_BT), kl_BT.detach(), torch.zeros_like(kl_BT))
    if rewards.dim() == 2:
        check_bt("rewards", rewards, kl_BT)
        return rewards - coef * kl_BT
    if rewards.shape != kl_BT.shape[:1]:
        raise ValueError(f"rewards has shape {tuple(rewards.shape)}, expected ({kl_BT.shape[0]},)")
    return rewards - coef * masked_sum(kl_BT, mask_BT, dim=-1)


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the softmax over the last axis (V = vocabulary), in nats: `(B, T, V) -> (B, T)`,
    or any leading shape `(..., V) -> (...)`. Exact zeros for -inf logits (masked vocabulary),
    with finite gradients."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    return -(p * logp.masked_fill(~torch.isfinite(logp), 0.0)).sum(-1)
