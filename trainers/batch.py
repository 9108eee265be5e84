"""Episodes -> padded tensors for the trainer.

Layout: every row is `prompt + completion`. Prompts are left-padded to a common length P and
completions right-padded to a common length T, so completion token j of every row sits at column
P + j and is predicted by the logits at column P + j - 1. Everything per token (`loss_mask`,
`sampler_logprobs`, and the trainer's logprobs, values and advantages) is then a (B, T) tensor
in completion space. Position ids count real tokens only, so left padding does not shift them and
the trainer sees the same positions the sampler did.

A `Batch` is frozen: a phase that changes rewards or the loss mask (reward shaping, overlong
filtering, masked importance sampling) derives a new one with `dataclasses.replace`, so that no
phase sees a batch change under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from rlvr.envs.episode import Episode, TruncationReason
from rlvr.envs.sampler import FinishReason
from rlvr.errors import RlvrError
from rlvr.verifiers.verdict import Outcome


class BatchError(RlvrError, ValueError):
    """Episodes that cannot form a batch (empty, or token lists of different lengths)."""


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor  # (B, P+T) long
    attention_mask: torch.Tensor  # (B, P+T) long, 0 on padding
    position_ids: torch.Tensor  # (B, P+T) long
    prompt_len: int  # P
    loss_mask: torch.Tensor  # (B, T) float, 1 exactly on the model's own tokens
    sampler_logprobs: torch.Tensor  # (B, T) float, 0 where loss_mask is 0
    rewards: torch.Tensor  # (B,) float, the episode's total reward
    turn_rewards: torch.Tensor  # (B, T) float, turn k's reward on turn k's last model token, 0 elsewhere
    group_ids: torch.Tensor  # (B,) long, episodes of one task share an id
    truncated: torch.Tensor  # (B,) bool, cut off: last turn at the token budget, or context full
    correct: torch.Tensor  # (B,) bool, outcome "correct"
    versions: torch.Tensor | None = None  # (B, T) long: the policy version that sampled each token, -1 elsewhere
    packed: bool = False  # run as one flattened sequence, padding-free (`trainers.packing`); micro-batches only
    # (B,) long: rows with one id are segments of one agent episode (`Episode.segment`), counted once
    # by the advantages; None: every row its own episode
    episode_ids: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_len :]

    @property
    def completion_len(self) -> int:
        return self.input_ids.shape[1] - self.prompt_len

    def select(self, rows: torch.Tensor | Sequence[int]) -> Batch:
        """The given rows, with columns that are padding in all of them trimmed away (so
        micro-batches of short episodes cost less)."""
        rows = torch.as_tensor(rows, dtype=torch.long)
        attn = self.attention_mask[rows]
        prompt_attn = attn[:, : self.prompt_len]
        lead = int((prompt_attn.sum(0) == 0).long().cumprod(0).sum())  # all-padding columns on the left
        used = attn[:, self.prompt_len :].sum(1).max() if len(rows) else 0
        width = max(1, int(used))
        keep = slice(lead, self.prompt_len + width)
        comp = slice(0, width)
        return Batch(
            input_ids=self.input_ids[rows, keep],
            attention_mask=attn[:, keep],
            position_ids=self.position_ids[rows, keep],
            prompt_len=self.prompt_len - lead,
            loss_mask=self.loss_mask[rows, comp],
            sampler_logprobs=self.sampler_logprobs[rows, comp],
            rewards=self.rewards[rows],
            turn_rewards=self.turn_rewards[rows, comp],
            group_ids=self.group_ids[rows],
            truncated=self.truncated[rows],
            correct=self.correct[rows],
            versions=None if self.versions is None else self.versions[rows, comp],
            episode_ids=None if self.episode_ids is None else self.episode_ids[rows],
        )

    def to(self, device: torch.device | str) -> Batch:
        """This batch on `device`: itself when it is there already (the forward's case on the CPU)."""
        if self.input_ids.device == torch.device(device):
            return self
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in moved.items()})


def collate(episodes: Sequence[Episode], pad_token_id: int) -> Batch:
    """Pad episodes into a `Batch` (see the module docstring for the layout)."""
    if not episodes:
        raise BatchError("no episodes to batch")
    for i, ep in enumerate(episodes):
        if not len(ep.completion_ids) == len(ep.loss_mask) == len(ep.logprobs):
            raise BatchError(
                f"episode {i} (task {ep.task_id}): completion_ids, loss_mask and logprobs differ in length "
                f"({len(ep.completion_ids)}, {len(ep.loss_mask)}, {len(ep.logprobs)})"
            )
        if not ep.prompt_ids:
            raise BatchError(f"episode {i} (task {ep.task_id}) has an empty prompt")
    n = len(episodes)
    p = max(len(ep.prompt_ids) for ep in episodes)
    t = max(1, max(len(ep.completion_ids) for ep in episodes))
    input_ids = torch.full((n, p + t), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((n, p + t), dtype=torch.long)
    loss_mask = torch.zeros((n, t), dtype=torch.float32)
    sampler_logprobs = torch.zeros((n, t), dtype=torch.float32)
    turn_rewards = torch.zeros((n, t), dtype=torch.float32)
    for row, ep in enumerate(episodes):
        lp, lc = len(ep.prompt_ids), len(ep.completion_ids)
        input_ids[row, p - lp : p] = torch.tensor(ep.prompt_ids, dtype=torch.long)
        input_ids[row, p : p + lc] = torch.tensor(ep.completion_ids, dtype=torch.long)
        attention_mask[row, p - lp : p + lc] = 1
        loss_mask[row, :lc] = torch.tensor(ep.loss_mask, dtype=torch.float32)
        sampler_logprobs[row, :lc] = torch.tensor(ep.logprobs, dtype=torch.float32)
        for column, reward in zip(turn_end_columns(ep.loss_mask, len(ep.turn_rewards)), ep.turn_rewards):
            turn_rewards[row, column] += reward
    sampler_logprobs *= loss_mask  # the contract says 0 off the mask; make it so
    versions = None
    if any(ep.versions for ep in episodes):  # the sampler tracked them (an episode without tokens has none)
        versions = torch.full((n, t), -1, dtype=torch.long)
        for row, ep in enumerate(episodes):
            if ep.versions:
                versions[row, : len(ep.versions)] = torch.tensor(ep.versions, dtype=torch.long)
    episode_ids = None
    if any(ep.segment for ep in episodes):  # an agent episode of several segments: one id for them all
        episode_ids = torch.cumsum(torch.tensor([ep.segment == 0 for ep in episodes], dtype=torch.long), 0)
    return Batch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=(attention_mask.cumsum(1) - 1).clamp(min=0),
        prompt_len=p,
        loss_mask=loss_mask,
        sampler_logprobs=sampler_logprobs,
        rewards=torch.tensor([ep.reward for ep in episodes], dtype=torch.float32),
        turn_rewards=turn_rewards,
        group_ids=torch.tensor([ep.group_id for ep in episodes], dtype=torch.long),
        truncated=torch.tensor([is_truncated(ep) for ep in episodes]),
        correct=torch.tensor([ep.outcome is Outcome.CORRECT for ep in episodes]),
        versions=versions,
        episode_ids=episode_ids,
    )


def is_truncated(ep: Episode) -> bool:
    """Cut off by a length limit (what DAPO's overlong filtering drops): the last turn hit the
    token budget, or a multi-turn episode's next turn did not fit in the context. An env's own
    turn limit is also `truncated`, but a failure to solve, not a cut answer."""
    context_cut = ep.truncation is TruncationReason.CONTEXT
    return ep.finish_reason is FinishReason.LENGTH or context_cut


def turn_end_columns(loss_mask: Sequence[int], turns: int) -> list[int]:
    """The column of each turn's last model token, one per turn reward. A turn is a run of mask-1
    tokens (the environment's tokens between turns are 0). Should the runs and the rewards not
    pair up one to one (a turn that produced no token), they are paired from the end, so the last
    reward stays on the last model token (surplus early rewards share the first run). A turn
    nearly always has a token (its eos at least), so this is a fallback. An episode without model
    tokens has no column (nothing of it is trained on)."""
    ends = [i for i, m in enumerate(loss_mask) if m and (i + 1 == len(loss_mask) or not loss_mask[i + 1])]
    if not ends:
        return []
    return [ends[max(0, len(ends) - turns + k)] for k in range(turns)]
