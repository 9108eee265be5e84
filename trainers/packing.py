"""Padding-free micro-batches (`--micro-batch-tokens N`).

Rows of a `Batch` are packed into micro-batches of at most N real tokens (prompt + completion,
padding not counted), and each micro-batch runs as ONE flattened sequence (batch dimension 1):
its rows' real tokens one after another, position ids restarting at 0 at every row. Given
`position_ids` and no `attention_mask` (and no cache), transformers derives the sequence
boundaries from the restarts (`masking_utils.find_packed_sequence_indices`): a block-diagonal
causal mask for sdpa/eager/flex, `cu_seqlens` for flash-attention. So no token attends to
another row and no compute is spent on padding. `trainers.policy.forward` maps the flat outputs
back to the usual (B, T) completion-space tensors (0 where a row has no token), so the loss code
does not change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rlvr.errors import RlvrError
from rlvr.trainers.batch import Batch


class PackingError(RlvrError, ValueError):
    """A token budget that cannot pack anything (< 1)."""


def pack(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices into `lengths`, grouped into bins of at most `budget` tokens: first-fit
    decreasing (longest first, each into the first bin with room, else a new bin). A single
    length over the budget gets a bin of its own (it cannot be split: its tokens attend to each
    other). Deterministic: ties keep their input order; bins are listed in creation order and
    hold their indices ascending."""
    if budget < 1:
        raise PackingError(f"micro_batch_tokens must be >= 1, got {budget}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep input order
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        n = int(lengths[i])
        for b, free in enumerate(room):
            if n <= free:
                bins[b].append(i)
                room[b] -= n
                break
        else:
            bins.append([i])
            room.append(budget - n)  # negative for an oversized row: nothing else fits there
    return [sorted(b) for b in bins]


def split_rows(batch: Batch, rows: torch.Tensor, size: int, tokens: int | None) -> list[torch.Tensor]:
    """The micro-batches of `rows` (indices into `batch`): `size` rows each when `tokens` is None,
    else packed by real-token count into bins of at most `tokens` (see `pack`)."""
    if tokens is None:
        return list(torch.split(rows, size))
    lengths = batch.attention_mask[rows].sum(1).tolist()
    return [rows[torch.tensor(b, dtype=torch.long)] for b in pack(lengths, tokens)]


def micro_batch(batch: Batch, rows: torch.Tensor, packed: bool) -> Batch:
    """`batch.select(rows)`, marked to run packed (one flattened sequence) when `packed`."""
    mb = batch.select(rows)
    return dataclasses.replace(mb, packed=True) if packed else mb


@dataclass
class PackedLayout:
    """Where a (trimmed, padded) batch's tokens sit in its flattened form. N real tokens; M of them
    are completion tokens (they are what is trained on)."""

    input_ids: torch.Tensor  # (1, N) the rows' real tokens, row after row
    position_ids: torch.Tensor  # (1, N) restarting at 0 at each row
    predictors: torch.Tensor  # (M,) flat index of the state that predicts each completion token
    targets: torch.Tensor  # (M,) the completion tokens
    rows: torch.Tensor  # (M,) their row in the (B, T) completion space
    cols: torch.Tensor  # (M,) and their column there
    shape: tuple[int, int]  # (B, T)

    def unpack(self, flat: torch.Tensor) -> torch.Tensor:
        """(M,) per completion token -> (B, T), 0 where a row has no token (differentiable)."""
        out = flat.new_zeros(self.shape)
        return out.index_put((self.rows, self.cols), flat)


def packed_layout(batch: Batch) -> PackedLayout:
    """The flattened form of `batch` (layout of `trainers.batch`: a row's real tokens are
    contiguous, prompt left-padded, completion right-padded, every prompt non-empty)."""
    real = batch.attention_mask.bool()
    n = int(real.sum())
    flat_index = torch.full(real.shape, -1, dtype=torch.long, device=real.device)
    flat_index[real] = torch.arange(n, device=real.device)  # row-major: row after row
    completion = flat_index[:, batch.prompt_len :]
    rows, cols = (completion >= 0).nonzero(as_tuple=True)
    token_at = completion[rows, cols]
    return PackedLayout(
        input_ids=batch.input_ids[real].unsqueeze(0),
        position_ids=batch.position_ids[real].unsqueeze(0),
        predictors=token_at - 1,  # the previous token of the same row (the prompt is never empty)
        targets=batch.input_ids[real][token_at],
        rows=rows,
        cols=cols,
        shape=(len(batch), batch.completion_len),
    )
