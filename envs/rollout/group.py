"""`Group`: what a rollout returns for each task, its G episodes and their statistics."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.envs.episode import Episode


@dataclass
class Group:
    """The G episodes of one task. Statistics leave `error` episodes out, and count an agent
    episode of several segments once (`Episode.segment`); `valid` holds every segment to train on."""

    task_id: str
    group_id: int
    episodes: list[Episode]

    @property
    def valid(self) -> list[Episode]:
        return [ep for ep in self.episodes if not ep.is_error]

    @property
    def rewards(self) -> list[float]:
        return [ep.reward for ep in self.valid if ep.segment == 0]

    @property
    def num_errors(self) -> int:
        return sum(ep.is_error for ep in self.episodes if ep.segment == 0)

    @property
    def mean_reward(self) -> float | None:
        rewards = self.rewards
        return sum(rewards) / len(rewards) if rewards else None
