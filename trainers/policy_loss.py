"""Policy losses: per-token losses `(B, T)` to be reduced by `trainers.aggregation.aggregate_loss`.
Config-free kernels: tensors, masks and scalars in, tensors out (`trainers.algorithms` picks
the loss and its settings from a preset).

Every loss takes `logprobs` (current policy, with gradient), `old_logprobs` (the policy that
sampled, no gradient), `advantages` `(B,)` or `(B, T)`, and `mask (B, T)` (1 on model tokens),
and returns a `PolicyLossOutput`: the per-token loss (exactly 0 off the mask), and the ratio and
clip indicator per token (detached, so the loop can aggregate them globally).
Log-probabilities are upcast from half precision; the log-ratio is clamped to +-20 before exp.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from trainers.aggregation import as_bool_mask, check_bt, masked_mean, masked_zero

RATIO_LEVELS = ("token", "sequence")
LOSS_TYPES = ("clipped", "cispo", "pg")
_MAX_LOG_RATIO = 20.0


@dataclass
class PolicyLossOutput:
    loss: Tensor  # (B, T) per-token loss, 0 off the mask
    ratio: Tensor  # (B, T) importance ratio pi/pi_old (detached), 1 off the mask
    clipped: Tensor  # (B, T) bool: the token's gradient is cut (or its weight capped) by clipping


def _prepare(logprobs, old_logprobs, advantages, mask) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    if not isinstance(logprobs, Tensor) or logprobs.dim() != 2:
        raise ValueError(f"logprobs must be a (B, T) tensor, got {getattr(logprobs, 'shape', logprobs)}")
    check_bt("mask", mask, logprobs)
    if old_logprobs is not None:
        check_bt("old_logprobs", old_logprobs, logprobs)
    if not isinstance(advantages, Tensor):
        raise TypeError(f"advantages must be a torch.Tensor, got {type(advantages).__name__}")
    if advantages.shape == logprobs.shape[:1]:
        advantages = advantages.unsqueeze(-1)
    elif advantages.shape != logprobs.shape:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)}, expected "
            f"({logprobs.shape[0]},) or {tuple(logprobs.shape)}"
        )
    lp = logprobs.float() if logprobs.dtype in (torch.float16, torch.bfloat16) else logprobs
    old = None if old_logprobs is None else old_logprobs.detach().to(lp.dtype)
    adv = advantages.detach().to(lp.dtype).expand_as(lp)
    return lp, old, adv, as_bool_mask(mask)


def importance_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor, level: str = "token") -> Tensor:
    """pi/pi_old per token, or per sequence (GSPO, Zheng et al. 2025) as the length-normalised
    geometric mean exp(mean_t log(pi/pi_old)) broadcast over the sequence's tokens. Differentiable
    in `logprobs`; 1 off the mask."""
    if level not in RATIO_LEVELS:
        raise ValueError(f"unknown ratio level {level!r}; known: {', '.join(RATIO_LEVELS)}")
    log_ratio = masked_zero(logprobs - old_logprobs.detach(), mask)
    if level == "sequence":
        log_ratio = masked_mean(log_ratio, mask, dim=-1).unsqueeze(-1).expand_as(log_ratio)
        log_ratio = masked_zero(log_ratio, mask)
    return torch.exp(log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))


def clipped_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
    ratio_level: str = "token",
) -> PolicyLossOutput:
    """PPO's clipped surrogate, loss = -min(r*A, clip(r, 1-eps_low, 1+eps_high)*A).
    `eps_high` defaults to `eps_low`; a larger one is DAPO's clip-higher. `dual_clip` = c > 1
    (Ye et al. 2020) also bounds the loss of negative advantages by -c*A, so a huge ratio on a bad
    token cannot blow up the update. `ratio_level="sequence"` is GSPO."""
    eps_high = eps_low if eps_high is None else eps_high
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"clip epsilons must be >= 0, got low={eps_low}, high={eps_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    lp, old, adv, m = _prepare(logprobs, old_logprobs, advantages, mask)
    ratio = importance_ratio(lp, old, m, ratio_level)
    loss_unclipped = -ratio * adv
    loss_clipped = -ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    loss = torch.maximum(loss_unclipped, loss_clipped)
    clipped = loss_clipped > loss_unclipped  # the clip branch won: no gradient from this token
    dual = torch.zeros_like(clipped)
    if dual_clip is not None:
        cap = -dual_clip * adv
        dual = (adv < 0) & (loss > cap)
        loss = torch.where(dual, cap, loss)
        clipped = clipped | dual
    clipped = clipped & m
    return PolicyLossOutput(masked_zero(loss, m), masked_one(ratio.detach(), m), clipped)


def cispo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float = 1.0,
    eps_high: float = 4.0,
) -> PolicyLossOutput:
    """CISPO (MiniMax-M1, Chen et al. 2025): loss = -sg(clip(r, 1-eps_low, 1+eps_high)) * A *
    log pi. The importance weight is clipped and detached, so every token keeps a REINFORCE
    gradient (none is dropped as in PPO's clip); `clipped` marks capped weights."""
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"clip epsilons must be >= 0, got low={eps_low}, high={eps_high}")
    lp, old, adv, m = _prepare(logprobs, old_logprobs, advantages, mask)
    ratio = importance_ratio(lp, old, m).detach()
    weight = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    clipped = (weight != ratio) & m
    loss = -weight * adv * masked_zero(lp, m)
    return PolicyLossOutput(masked_zero(loss, m), masked_one(ratio, m), clipped)


def pg_loss(logprobs: Tensor, advantages: Tensor, mask: Tensor) -> PolicyLossOutput:
    """Plain on-policy policy gradient (REINFORCE): loss = -A * log pi, gradient -A * grad log pi.
    Only valid on fresh samples (one update per rollout): with no ratio or clip, a second epoch
    or minibatch would apply it to samples of an older policy (`trainers.algorithms` refuses)."""
    lp, _, adv, m = _prepare(logprobs, None, advantages, mask)
    loss = -adv * masked_zero(lp, m)
    return PolicyLossOutput(masked_zero(loss, m), torch.ones_like(lp).detach(), torch.zeros_like(m))


@torch.no_grad()
def tis_weight(old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cap: float = 2.0) -> Tensor:
    """Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly brings
    you off-policy RL"), the weight of `old_logprobs="sampler"`: the old logprobs are still the
    trainer's own (recomputed), and each token's loss is also weighted by
    min(exp(old_trainer - sampler), cap) to correct for the two engines' mismatch. That is verl's
    "decoupled" mode (proximal policy = the trainer's recomputation, behaviour policy = the
    sampler). It is the right correction only if the sampler's logprobs describe the distribution
    it drew from; with top_p < 1 it draws from a truncated one that neither the trainer's nor (by
    default) vLLM's reported logprobs describe, so the weights are biased and
    `trainers.algorithms.check_settings` refuses the combination. Detached; 0 off the mask."""
    if not cap > 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    check_bt("sampler_logprobs", sampler_logprobs, old_logprobs)
    check_bt("mask", mask, old_logprobs)
    log_w = masked_zero(old_logprobs - sampler_logprobs, mask).clamp(max=_MAX_LOG_RATIO)
    return masked_zero(torch.exp(log_w).clamp(max=cap), mask)


def masked_one(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(as_bool_mask(mask), x, torch.ones((), dtype=x.dtype, device=x.device))
