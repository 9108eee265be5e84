"""Masks and loss aggregation: reduce a per-token loss `(B, T)` to a scalar.

Four modes (`AGGREGATIONS`, named in `kernels.names`):
- ``token_mean``: sum of all masked token losses / number of masked tokens (DAPO).
- ``seq_mean_token_mean``: each sequence's token-mean, averaged over sequences (GRPO, GSPO).
- ``seq_mean_token_sum``: each sequence's token-sum, averaged over sequences (RLOO: the whole
  completion is one action, its log-probability the sum over its tokens).
- ``seq_mean_token_sum_norm``: each sequence's token-sum / a constant length, averaged over
  sequences (Dr. GRPO; the constant is usually the generation budget, so long and short answers
  are not weighted differently per token).

The denominator is an explicit argument: pass the *whole optimizer step's* denominator (sum of
`loss_denominator(mask_k, mode)` over all its minibatches, and over data-parallel ranks), so each
minibatch's loss is its exact share and gradient accumulation does not change the result:
``sum_k aggregate_loss(loss_k, mask_k, mode, D) == aggregate_loss(loss, mask, mode, D)``.

Masks may be bool or float (0/1); positions where the mask is 0 never reach the result, even if
they hold NaN or inf.

Names carry their shape where it varies (B = episodes in the batch, T = token positions:
`loss_BT`, `row_sums_B`); the masked helpers (`masked_zero`, `masked_sum`, `masked_mean`) take
any shape and keep plain names.
"""

from __future__ import annotations

from numbers import Real

import torch
from torch import Tensor

from rlvr.trainers.kernels.names import AGGREGATIONS


def check_bt(name: str, x_BT: Tensor, like_BT: Tensor) -> None:
    """Raise a clear ValueError unless `x_BT` has the `(B, T)` shape of `like_BT`."""
    if not isinstance(x_BT, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x_BT).__name__}")
    if x_BT.shape != like_BT.shape:
        raise ValueError(f"{name} has shape {tuple(x_BT.shape)}, expected {tuple(like_BT.shape)}")


def as_bool_mask(mask: Tensor) -> Tensor:
    """`mask` (any shape, bool or 0/1) as bool, same shape."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    return mask if mask.dtype == torch.bool else mask != 0


def as_float_mask(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """`mask` (any shape, bool or 0/1) as 0/1 of `dtype`, same shape."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    return mask.to(dtype)


def masked_zero(x: Tensor, mask: Tensor) -> Tensor:
    """`x` where the mask is set, exactly 0 elsewhere (NaN/inf off the mask cannot leak). Any
    shape; `mask` has `x`'s, and so does the result."""
    return torch.where(as_bool_mask(mask), x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum over masked positions: a scalar, or `x`'s shape without `dim` (`(B, T)`, dim=-1 ->
    `(B,)`). Any shape; `mask` has `x`'s."""
    m = as_float_mask(mask, x.dtype)
    xz = masked_zero(x, mask) * m
    return xz.sum() if dim is None else xz.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean over masked positions; 0 (not NaN) where there are none. A scalar, or `x`'s shape
    without `dim` (`(B, T)`, dim=-1 -> `(B,)`). Any shape; `mask` has `x`'s."""
    m = as_float_mask(mask, x.dtype)
    count = m.sum() if dim is None else m.sum(dim)
    total = masked_sum(x, mask, dim)
    return total / torch.where(count > 0, count, torch.ones_like(count))


def turn_ends(mask_BT: Tensor) -> tuple[Tensor, Tensor]:
    """Each run of consecutive masked tokens of `mask_BT (B, T)` is one model turn (the
    environment's tokens, mask 0, separate turns). Returns `(ends_BT, lengths_BT)`, both
    `(B, T)`: True at each turn's last model token, and there the turn's number of model tokens
    (0 elsewhere)."""
    m_BT = as_bool_mask(mask_BT)
    if m_BT.dim() != 2:
        raise ValueError(f"mask must be (B, T), got shape {tuple(m_BT.shape)}")
    after_BT = torch.cat([m_BT[:, 1:], torch.zeros_like(m_BT[:, :1])], dim=1)
    ends_BT = m_BT & ~after_BT
    count_BT = m_BT.long().cumsum(dim=1)
    # the count at the last 0 before each position
    before_run_BT = torch.where(m_BT, torch.zeros_like(count_BT), count_BT).cummax(dim=1).values
    return ends_BT, torch.where(ends_BT, count_BT - before_run_BT, torch.zeros_like(count_BT))


def loss_denominator(mask_BT: Tensor, mode: str) -> Tensor:
    """This mask's `(B, T)` contribution to the step's denominator (additive over
    minibatches/ranks), a scalar: the number of masked tokens for ``token_mean``; otherwise the
    number of sequences that have at least one masked token (a row with no tokens is not a
    sequence to average over)."""
    _check_mode(mode)
    m_BT = as_float_mask(mask_BT)
    if mode == "token_mean":
        return m_BT.sum()
    return (m_BT.sum(dim=-1) > 0).to(torch.float32).sum()


def aggregate_loss(
    loss_BT: Tensor,
    mask_BT: Tensor,
    mode: str,
    denominator: float | Tensor | None = None,
    constant_length: int | None = None,
) -> Tensor:
    """Reduce a per-token `loss_BT (B, T)` to a scalar with `mask_BT (B, T)`.

    `denominator`: the global count for the whole optimizer step (see module docstring); None
    uses this batch's own `loss_denominator(mask_BT, mode)`. `constant_length` is required by
    ``seq_mean_token_sum_norm``. An all-zero mask gives 0 (with a graph), never NaN."""
    _check_mode(mode)
    if not isinstance(loss_BT, Tensor) or loss_BT.dim() != 2:
        raise ValueError(f"loss must be a (B, T) tensor, got {getattr(loss_BT, 'shape', type(loss_BT))}")
    check_bt("mask", mask_BT, loss_BT)
    if denominator is None:
        denominator = loss_denominator(mask_BT, mode)
    denom = torch.as_tensor(denominator, dtype=loss_BT.dtype, device=loss_BT.device)
    if denom.dim() != 0 or not bool(torch.isfinite(denom)) or float(denom) < 0:
        raise ValueError(f"denominator must be a finite non-negative scalar, got {denominator!r}")

    row_sums_B = masked_sum(loss_BT, mask_BT, dim=-1)
    if mode == "token_mean":
        numerator = row_sums_B.sum()
    elif mode == "seq_mean_token_mean":
        counts_B = as_float_mask(mask_BT, loss_BT.dtype).sum(dim=-1)
        numerator = (row_sums_B / torch.where(counts_B > 0, counts_B, torch.ones_like(counts_B))).sum()
    elif mode == "seq_mean_token_sum":
        numerator = row_sums_B.sum()
    else:
        if (
            constant_length is None
            or isinstance(constant_length, bool)
            or not isinstance(constant_length, Real)
            or constant_length <= 0
        ):
            raise ValueError(f"seq_mean_token_sum_norm needs a positive constant_length, got {constant_length!r}")
        numerator = row_sums_B.sum() / constant_length
    # A zero denominator only comes with an empty mask, whose numerator is 0: divide by 1.
    return numerator / torch.where(denom > 0, denom, torch.ones_like(denom))


def _check_mode(mode: str) -> None:
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")
