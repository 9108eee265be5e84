"""`RolloutRequest`: what one rollout plays, as plain data (the trainer builds one per step, and a Ray
rollout worker is sent its chunk of one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.sampler import SamplingSettings


@dataclass(frozen=True)
class RolloutRequest:
    """`group_size` (G) episodes of environment `env`, made with `env_args`, for each task: one group per
    task in order, group ids counting from `group_id_start`. The tasks are `seeds` (reset seeds, each
    drawing a task) or `task_ids` (tasks by id, `seeds` then empty). `max_length` bounds an episode,
    prompt plus completion tokens (None: the sampler's `max_model_len`, if it has one); `model_info`
    (the model and its step) goes into every episode's metadata."""

    env: str
    env_args: Mapping[str, Any]
    seeds: tuple[int, ...]
    group_size: int
    sampling: SamplingSettings
    model_info: Mapping[str, Any] = field(default_factory=dict)
    max_length: int | None = None
    group_id_start: int = 0
    task_ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # any sequence may be passed (a range, a list): kept as tuples, plain data to send and compare
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if self.task_ids is not None:
            object.__setattr__(self, "task_ids", tuple(str(t) for t in self.task_ids))
            if self.seeds:
                raise ValueError("pass exactly one of task_ids and seeds")
        if self.group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size}")

    def starts(self) -> tuple[tuple[str | None, int | None], ...]:
        """Per group: (task id, None), or (None, reset seed)."""
        if self.task_ids is not None:
            return tuple((t, None) for t in self.task_ids)
        return tuple((None, s) for s in self.seeds)
