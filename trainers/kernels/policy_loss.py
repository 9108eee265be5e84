"""Policy losses: per-token losses `(B, T)` to be reduced by `trainers.kernels.aggregation.aggregate_loss`.
Config-free kernels: tensors, masks and scalars in, tensors out (`trainers.algorithms` picks
the loss and its settings from a preset).

Names carry their shape (B = episodes in the batch, T = token positions). Every loss takes
`logprobs_BT` (current policy, with gradient), `old_logprobs_BT` (the policy that sampled, no
gradient), `advantages` `(B,)` or `(B, T)`, and `mask_BT` (1 on model tokens), and returns a
`PolicyLossOutput`: the per-token loss `(B, T)` (exactly 0 off the mask), and the ratio and clip
indicator per token `(B, T)` (detached, so the loop can aggregate them globally).
Log-probabilities are upcast from half precision; the log-ratio is clamped to +-20 before exp.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.trainers.kernels.aggregation import as_bool_mask, check_bt, masked_mean, masked_zero
from rlvr.trainers.kernels.log_ratio import clamp_log_ratio
from rlvr.trainers.kernels.names import RATIO_LEVELS


@dataclass
class PolicyLossOutput:
    loss: Tensor  # (B, T) per-token loss, 0 off the mask
    ratio: Tensor  # (B, T) importance ratio pi/pi_old (detached), 1 off the mask
    clipped: Tensor  # (B, T) bool: the token's gradient is cut (or its weight capped) by clipping


def _prepare(logprobs_BT, old_logprobs_BT, advantages, mask_BT) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Check shapes and return `(lp_BT, old_BT, adv_BT, m_BT)`: the logprobs upcast from half
    precision, the old ones detached in that dtype (None if None), the advantages (`(B,)` or
    `(B, T)`) detached and broadcast to `(B, T)`, and the mask as bool."""
    if not isinstance(logprobs_BT, Tensor) or logprobs_BT.dim() != 2:
        raise ValueError(f"logprobs must be a (B, T) tensor, got {getattr(logprobs_BT, 'shape', logprobs_BT)}")
    check_bt("mask", mask_BT, logprobs_BT)
    if old_logprobs_BT is not None:
        check_bt("old_logprobs", old_logprobs_BT, logprobs_BT)
    if not isinstance(advantages, Tensor):
        raise TypeError(f"advantages must be a torch.Tensor, got {type(advantages).__name__}")
    if advantages.shape == logprobs_BT.shape[:1]:
        advantages = advantages.unsqueeze(-1)
    elif advantages.shape != logprobs_BT.shape:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)}, expected "
            f"({logprobs_BT.shape[0]},) or {tuple(logprobs_BT.shape)}"
        )
    lp_BT = logprobs_BT.float() if logprobs_BT.dtype in (torch.float16, torch.bfloat16) else logprobs_BT
    old_BT = None if old_logprobs_BT is None else old_logprobs_BT.detach().to(lp_BT.dtype)
    adv_BT = advantages.detach().to(lp_BT.dtype).expand_as(lp_BT)
    return lp_BT, old_BT, adv_BT, as_bool_mask(mask_BT)


def importance_ratio(logprobs_BT: Tensor, old_logprobs_BT: Tensor, mask_BT: Tensor, level: str = "token") -> Tensor:
    """pi/pi_old per token, or per sequence (GSPO, Zheng et al. 2025) as the length-normalised
    geometric mean exp(mean_t log(pi/pi_old)) broadcast over the sequence's tokens. All `(B, T)`,
    result included. Differentiable in `logprobs_BT`; 1 off the mask."""
    if level not in RATIO_LEVELS:
        raise ValueError(f"unknown ratio level {level!r}; known: {', '.join(RATIO_LEVELS)}")
    log_ratio_BT = masked_zero(logprobs_BT - old_logprobs_BT.detach(), mask_BT)
    if level == "sequence":
        log_ratio_B = masked_mean(log_ratio_BT, mask_BT, dim=-1)
        log_ratio_BT = masked_zero(log_ratio_B.unsqueeze(-1).expand_as(log_ratio_BT), mask_BT)
    return torch.exp(clamp_log_ratio(log_ratio_BT))


def clipped_policy_loss(
    logprobs_BT: Tensor,
    old_logprobs_BT: Tensor,
    advantages: Tensor,
    mask_BT: Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
    ratio_level: str = "token",
) -> PolicyLossOutput:
    """PPO's clipped surrogate, loss = -min(r*A, clip(r, 1-eps_low, 1+eps_high)*A).
    `eps_high` defaults to `eps_low`; a larger one is DAPO's clip-higher. `dual_clip` = c > 1
    (Ye et al. 2020) also bounds the loss of negative advantages by -c*A, so a huge ratio on a bad
    token cannot blow up the update. `ratio_level="sequence"` is GSPO. `advantages` is `(B,)` or
    `(B, T)`; the other tensors and the output's are `(B, T)`."""
    eps_high = eps_low if eps_high is None else eps_high
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"clip epsilons must be >= 0, got low={eps_low}, high={eps_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    lp_BT, old_BT, adv_BT, m_BT = _prepare(logprobs_BT, old_logprobs_BT, advantages, mask_BT)
    ratio_BT = importance_ratio(lp_BT, old_BT, m_BT, ratio_level)
    loss_unclipped_BT = -ratio_BT * adv_BT
    loss_clipped_BT = -ratio_BT.clamp(1.0 - eps_low, 1.0 + eps_high) * adv_BT
    loss_BT = torch.maximum(loss_unclipped_BT, loss_clipped_BT)
    clipped_BT = loss_clipped_BT > loss_unclipped_BT  # the clip branch won: no gradient from this token
    dual_BT = torch.zeros_like(clipped_BT)
    if dual_clip is not None:
        cap_BT = -dual_clip * adv_BT
        dual_BT = (adv_BT < 0) & (loss_BT > cap_BT)
        loss_BT = torch.where(dual_BT, cap_BT, loss_BT)
        clipped_BT = clipped_BT | dual_BT
    clipped_BT = clipped_BT & m_BT
    return PolicyLossOutput(masked_zero(loss_BT, m_BT), masked_one(ratio_BT.detach(), m_BT), clipped_BT)


def cispo_loss(
    logprobs_BT: Tensor,
    old_logprobs_BT: Tensor,
    advantages: Tensor,
    mask_BT: Tensor,
    eps_low: float = 1.0,
    eps_high: float = 4.0,
) -> PolicyLossOutput:
    """CISPO (MiniMax-M1, Chen et al. 2025): loss = -sg(clip(r, 1-eps_low, 1+eps_high)) * A *
    log pi. The importance weight is clipped and detached, so every token keeps a REINFORCE
    gradient (none is dropped as in PPO's clip); `clipped` marks capped weights. `advantages` is
    `(B,)` or `(B, T)`; the other tensors and the output's are `(B, T)`."""
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"clip epsilons must be >= 0, got low={eps_low}, high={eps_high}")
    lp_BT, old_BT, adv_BT, m_BT = _prepare(logprobs_BT, old_logprobs_BT, advantages, mask_BT)
    ratio_BT = importance_ratio(lp_BT, old_BT, m_BT).detach()
    weight_BT = ratio_BT.clamp(1.0 - eps_low, 1.0 + eps_high)
    clipped_BT = (weight_BT != ratio_BT) & m_BT
    loss_BT = -weight_BT * adv_BT * masked_zero(lp_BT, m_BT)
    return PolicyLossOutput(masked_zero(loss_BT, m_BT), masked_one(ratio_BT, m_BT), clipped_BT)


def pg_loss(logprobs_BT: Tensor, advantages: Tensor, mask_BT: Tensor) -> PolicyLossOutput:
    """Plain on-policy policy gradient (REINFORCE): loss = -A * log pi, gradient -A * grad log pi.
    Only valid on fresh samples (one update per rollout): with no ratio or clip, a second epoch
    or minibatch would apply it to samples of an older policy (`trainers.algorithms` refuses).
    `advantages` is `(B,)` or `(B, T)`; the other tensors and the output's are `(B, T)`."""
    lp_BT, _, adv_BT, m_BT = _prepare(logprobs_BT, None, advantages, mask_BT)
    loss_BT = -adv_BT * masked_zero(lp_BT, m_BT)
    return PolicyLossOutput(masked_zero(loss_BT, m_BT), torch.ones_like(lp_BT).detach(), torch.zeros_like(m_BT))


def masked_one(x: Tensor, mask: Tensor) -> Tensor:
    """`x` where the mask is set, exactly 1 elsewhere. Any shape; `mask` has `x`'s."""
    return torch.where(as_bool_mask(mask), x, torch.ones((), dtype=x.dtype, device=x.device))
