"""An episode: what the model did in an environment, token-exact, plus what reproduces it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from verifiers.verdict import Outcome


@dataclass
class Episode:
    """`prompt_ids` are the opening prompt's tokens. `completion_ids` are everything after it:
    the model's tokens exactly as sampled, interleaved (multi-turn) with the environment's reply
    tokens; `loss_mask[i]` is 1 exactly where `completion_ids[i]` came from the model, and
    `logprobs[i]` is the sampler's logprob there (0.0 elsewhere)."""

    env_id: str
    task_id: str
    group_id: int
    prompt_ids: list[int]
    completion_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    turn_rewards: list[float]
    outcome: Outcome
    messages: list[dict[str, str]]
    finish_reason: str
    metadata: dict[str, Any] = field(default_factory=dict)  # env_version, seed, verifier, model, model_step

    @property
    def reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def is_error(self) -> bool:
        return self.outcome is Outcome.ERROR

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = str(self.outcome)
        d["reward"] = self.reward
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Episode":
        d = {k: v for k, v in d.items() if k != "reward"}
        d["outcome"] = Outcome(d["outcome"])
        return cls(**d)
