"""Policy losses: per-token losses `(B, T)` to be reduced by `trainers.aggregation.aggregate_loss`.

Every loss takes `logprobs` (current policy, with gradient), `old_logprobs` (the policy that
sampled, no gradient), `advantages` `(B,)` or `(B, T)`, and `mask (B, T)` (1 on model tokens),
and returns a `PolicyLossOutput`: the per-token loss (exactly 0 off the mask), the ratio and
clip indicator per token (detached, so the loop can aggregate them globally), and stats (0-dim
detached tensors, means over this call's masked tokens; 0 for an empty mask).
Log-probabilities are upcast from half precision; the log-ratio is clamped to +-20 before exp.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from trainers.aggregation import as_bool_mask, check_bt, masked_mean, masked_zero
from trainers.kl import kl_estimate

if TYPE_CHECKING:
    from trainers.algorithms import AlgoConfig

RATIO_LEVELS = ("token", "sequence")
LOSS_TYPES = ("clipped", "cispo", "pg")
_MAX_LOG_RATIO = 20.0


@dataclass
class PolicyLossOutput:
    loss: Tensor  # (B, T) per-token loss, 0 off the mask
    ratio: Tensor  # (B, T) importance ratio pi/pi_old (detached), 1 off the mask
    clipped: Tensor  # (B, T) bool: the token's gradient is cut (or its weight capped) by clipping
    stats: dict[str, Tensor] = field(default_factory=dict)


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
    stats = _ratio_stats(ratio, m)
    stats["clip_frac"] = masked_mean(clipped.to(lp.dtype), m).detach()
    stats["clip_frac_low"] = masked_mean((clipped & (adv < 0) & ~dual).to(lp.dtype), m).detach()
    stats["clip_frac_high"] = masked_mean((clipped & (adv > 0)).to(lp.dtype), m).detach()
    stats["dual_clip_frac"] = masked_mean((dual & m).to(lp.dtype), m).detach()
    return PolicyLossOutput(masked_zero(loss, m), masked_one(ratio.detach(), m), clipped, stats)


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
    stats = _ratio_stats(ratio, m)
    stats["clip_frac"] = masked_mean(clipped.to(lp.dtype), m).detach()
    return PolicyLossOutput(masked_zero(loss, m), masked_one(ratio, m), clipped, stats)


def pg_loss(logprobs: Tensor, advantages: Tensor, mask: Tensor) -> PolicyLossOutput:
    """Plain on-policy policy gradient (REINFORCE): loss = -A * log pi, gradient -A * grad log pi.
    Only valid on fresh samples (one update per rollout)."""
    lp, _, adv, m = _prepare(logprobs, None, advantages, mask)
    loss = -adv * masked_zero(lp, m)
    ones = torch.ones_like(lp).detach()
    zero = torch.zeros((), dtype=lp.dtype, device=lp.device)
    return PolicyLossOutput(masked_zero(loss, m), ones, torch.zeros_like(m), {"clip_frac": zero})


@torch.no_grad()
def tis_weight(old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cap: float = 2.0) -> Tensor:
    """Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly brings
    you off-policy RL"): when old logprobs are the sampler's (vLLM) rather than recomputed by the
    trainer, weight each token's loss by min(exp(old_trainer - sampler), cap) to correct for the
    two engines' mismatch. Detached; 0 off the mask."""
    if not cap > 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    check_bt("sampler_logprobs", sampler_logprobs, old_logprobs)
    check_bt("mask", mask, old_logprobs)
    log_w = masked_zero(old_logprobs - sampler_logprobs, mask).clamp(max=_MAX_LOG_RATIO)
    return masked_zero(torch.exp(log_w).clamp(max=cap), mask)


def compute_policy_loss(
    cfg: "AlgoConfig",
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    ref_logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    is_weights: Tensor | None = None,
) -> PolicyLossOutput:
    """The preset's whole per-token policy objective: its policy loss (times `is_weights`, e.g.
    `tis_weight`, when given), plus `kl_coef * KL` when the KL goes in the loss (needs
    `ref_logprobs`), minus `entropy_coef * entropy` (needs `entropy (B, T)` when the coef is set).
    Reduce the result's `loss` with `aggregate_loss(..., cfg.aggregation, ...)`."""
    if cfg.loss_type == "clipped":
        out = clipped_policy_loss(
            logprobs, old_logprobs, advantages, mask,
            cfg.clip_eps_low, cfg.clip_eps_high, cfg.dual_clip, cfg.ratio_level,
        )
    elif cfg.loss_type == "cispo":
        out = cispo_loss(logprobs, old_logprobs, advantages, mask, cfg.clip_eps_low, cfg.clip_eps_high)
    else:
        out = pg_loss(logprobs, advantages, mask)
    loss, m = out.loss, as_bool_mask(mask)
    if is_weights is not None:
        check_bt("is_weights", is_weights, logprobs)
        loss = loss * is_weights.detach().to(loss.dtype)
    if cfg.kl_in_loss and cfg.kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError(f"{cfg.name}: kl_placement='loss' with kl_coef > 0 needs ref_logprobs")
        kl = kl_estimate(logprobs.to(loss.dtype), ref_logprobs.to(loss.dtype), m, cfg.kl_estimator)
        loss = loss + cfg.kl_coef * kl
        out.stats["kl"] = masked_mean(kl.detach(), m)
    if cfg.entropy_coef > 0:
        if entropy is None:
            raise ValueError(f"{cfg.name}: entropy_coef > 0 needs the per-token entropy")
        check_bt("entropy", entropy, logprobs)
        loss = loss - cfg.entropy_coef * entropy.to(loss.dtype)
        out.stats["entropy"] = masked_mean(entropy.detach().to(loss.dtype), m)
    out.loss = masked_zero(loss, m)
    return out


def masked_one(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(as_bool_mask(mask), x, torch.ones((), dtype=x.dtype, device=x.device))


def _ratio_stats(ratio: Tensor, m: Tensor) -> dict[str, Tensor]:
    r = ratio.detach()
    has = bool(m.any())
    return {
        "ratio_mean": masked_mean(r, m),
        "ratio_max": r.masked_fill(~m, -torch.inf).max() if has else r.new_zeros(()),
        "ratio_min": r.masked_fill(~m, torch.inf).min() if has else r.new_zeros(()),
        # k3 estimate of KL(pi_old || pi) on the old policy's samples, (r - 1) - log r:
        # how far this update has moved the policy.
        "approx_kl": masked_mean((r - 1.0) - torch.log(r), m),
    }
