"""Rollout correction: weights for the tokens a sampler drew from a policy that is not quite the
trainer's. Config-free kernels: tensors, masks and scalars in, tensors out.

The sampler (vLLM: other kernels, other precision; or, asynchronously, weights some versions old)
is the behaviour policy mu. The trainer's recomputation of the same tokens before the update is the
proximal policy pi_old: the PPO clip is taken around pi_old, and the loss of each token is also
multiplied by an importance weight that corrects from mu to pi_old. That is the decoupled PPO
objective (Hilton et al. 2022; AReaL, Fu et al. 2025):

    loss_t = w_t * clip_loss(pi / pi_old, A)

with rho_t = pi_old(y_t) / mu(y_t) the token's ratio, rho = prod_t rho_t = exp(sum_t log rho_t)
the sequence's, and c >= 1 the cap. The modes choose w:

    token_tis       w_t = min(rho_t, c)                         truncated IS (Yao et al. 2025)
    sequence_tis    w_t = min(rho, c)                           one weight per sequence
    token_mask      w_t = rho_t, and token t leaves the loss     masked IS (Liu et al. 2025):
                    when rho_t is outside [1/c, c]               no bias from a cap, no outliers
    sequence_mask   w_t = rho, and the whole sequence leaves
                    the loss when rho is outside [1/c, c]

A masked token also leaves the loss's denominator (it is taken out of the loss mask), so the other
tokens' weight does not shrink with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import Tensor

from rlvr.trainers.kernels.aggregation import as_bool_mask, check_bt, masked_zero
from rlvr.trainers.kernels.log_ratio import clamp_log_ratio


class Correction(StrEnum):
    TOKEN_TIS = "token_tis"
    SEQUENCE_TIS = "sequence_tis"
    TOKEN_MASK = "token_mask"
    SEQUENCE_MASK = "sequence_mask"

    @property
    def level(self) -> str:
        return "sequence" if self.value.startswith("sequence") else "token"

    @property
    def masks(self) -> bool:
        return self.value.endswith("mask")


@dataclass
class CorrectionWeights:
    """The weights of one batch and what to log about them."""

    weights: Tensor  # (B, T) detached; 0 off the kept mask
    keep: Tensor  # (B, T) bool: the tokens that stay in the loss (the loss mask minus the masked ones)
    stats: dict[str, float]


@torch.no_grad()
def log_ratios(old_logprobs_BT: Tensor, sampler_logprobs_BT: Tensor, mask_BT: Tensor, level: str) -> Tensor:
    """log(pi_old / mu) per token, or the sequence's sum of them broadcast over its tokens. `(B, T)`,
    0 off the mask, clamped to +-20 so that exp stays finite."""
    check_bt("sampler_logprobs", sampler_logprobs_BT, old_logprobs_BT)
    check_bt("mask", mask_BT, old_logprobs_BT)
    log_rho_BT = masked_zero(old_logprobs_BT.float() - sampler_logprobs_BT.float(), mask_BT)
    if level == "sequence":
        log_rho_BT = masked_zero(log_rho_BT.sum(dim=-1, keepdim=True).expand_as(log_rho_BT), mask_BT)
    return clamp_log_ratio(log_rho_BT)


@torch.no_grad()
def correction_weights(
    old_logprobs_BT: Tensor, sampler_logprobs_BT: Tensor, mask_BT: Tensor, mode: Correction | str, cap: float = 2.0
) -> CorrectionWeights:
    """The weights of `mode` (see the module's table) for tokens sampled by mu (`sampler_logprobs_BT`)
    and recomputed by the trainer (`old_logprobs_BT`), with cap c = `cap`. All tensors `(B, T)`.

    Stats, over the tokens of the loss mask (sequences for the sequence modes):
    `is_ratio_mean` / `is_ratio_max` of rho before any cap or mask, `is_weight_mean` of the
    applied weight over the kept tokens, `is_ess` the normalised effective sample size
    (sum w)^2 / (n sum w^2) of the applied weights (1: all equal), `is_capped_frac` (TIS: weights
    at the cap) and `is_masked_frac` (masked IS: tokens taken out of the loss)."""
    mode = Correction(mode)
    if not cap >= 1.0:
        raise ValueError(f"the rollout-correction cap must be >= 1, got {cap}")
    m_BT = as_bool_mask(mask_BT)
    rho_BT = torch.exp(log_ratios(old_logprobs_BT, sampler_logprobs_BT, m_BT, mode.level))
    if mode.masks:
        keep_BT = m_BT & (rho_BT >= 1.0 / cap) & (rho_BT <= cap)
        weights_BT = torch.where(keep_BT, rho_BT, torch.zeros_like(rho_BT))
    else:
        keep_BT = m_BT
        weights_BT = torch.where(m_BT, rho_BT.clamp(max=cap), torch.zeros_like(rho_BT))
    units = _units(m_BT, mode.level)  # one entry per token, or per sequence
    rho, w, kept = units(rho_BT), units(weights_BT), units(keep_BT)
    n = max(int(rho.numel()), 1)
    w_kept = w[kept]
    stats = {
        "is_ratio_mean": float(rho.sum()) / n,
        "is_ratio_max": float(rho.max()) if rho.numel() else 0.0,
        "is_weight_mean": float(w_kept.mean()) if w_kept.numel() else 0.0,
        "is_ess": effective_sample_size(w),
        "is_capped_frac": 0.0 if mode.masks else float((rho >= cap).sum()) / n,
        "is_masked_frac": float((m_BT & ~keep_BT).sum()) / max(int(m_BT.sum()), 1),
    }
    return CorrectionWeights(weights=weights_BT, keep=keep_BT, stats=stats)


def effective_sample_size(weights: Tensor) -> float:
    """Normalised ESS (sum w)^2 / (n * sum w^2) of a flat tensor of weights: 1 when all are equal,
    1/n when one carries everything; 0 for no weight at all."""
    w = weights.double().flatten()
    square_sum = float((w * w).sum())
    return float(w.sum()) ** 2 / (w.numel() * square_sum) if square_sum > 0 else 0.0


def _units(mask_BT: Tensor, level: str):
    """A function taking a `(B, T)` tensor to its values on the mask (token level) or to one value
    per sequence that has a masked token (sequence level: the value on its first token)."""
    if level == "token":
        return lambda x: x[mask_BT]
    has_B = mask_BT.any(dim=-1)
    first_B = mask_BT.float().argmax(dim=-1)
    rows = torch.arange(mask_BT.shape[0])[has_B]
    return lambda x: x[rows, first_B[has_B]]


@torch.no_grad()
def staleness_stats(versions_BT: Tensor, mask_BT: Tensor, version: int, max_staleness: int) -> dict[str, float]:
    """How many updates older than the trainer's weights (`version`) were the weights that sampled
    each model token (`versions_BT`, -1 where unknown): mean, max, and the share at each lag
    0..`max_staleness` (the histogram). A token outside [0, max_staleness] means the pacing is
    broken: a RuntimeError rather than a silent update on it."""
    check_bt("versions", versions_BT, mask_BT)
    known = as_bool_mask(mask_BT) & (versions_BT >= 0)
    lag = (version - versions_BT)[known]
    if lag.numel() == 0:
        return {}
    if int(lag.min()) < 0 or int(lag.max()) > max_staleness:
        raise RuntimeError(
            f"tokens sampled {int(lag.min())}..{int(lag.max())} updates before the weights trained "
            f"(version {version}); max_staleness is {max_staleness}"
        )
    stats = {"staleness_mean": float(lag.double().mean()), "staleness_max": float(lag.max())}
    for k in range(max_staleness + 1):
        stats[f"staleness_{k}_frac"] = float((lag == k).double().mean())
    return stats
