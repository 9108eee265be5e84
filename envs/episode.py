"""An episode: what the model did in an environment, token-exact, plus what reproduces it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from envs.sampler import FinishReason
from verifiers.verdict import Outcome


@dataclass
class Episode:
    """`prompt_ids` are the opening prompt's tokens. `completion_ids` are everything after it:
    the model's tokens exactly as sampled, interleaved (multi-turn) with the environment's reply
    tokens; `loss_mask[i]` is 1 exactly where `completion_ids[i]` came from the model, and
    `logprobs[i]` is the sampler's logprob there (0.0 elsewhere). `finish_reason` is how the
    last model turn ended, None when the model never sampled (the prompt did not fit; "" in
    `to_dict`).
    Strings given for `outcome` and `finish_reason` (old JSONL logs) are converted to the enums."""

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
    finish_reason: FinishReason | None
    metadata: dict[str, Any] = field(default_factory=dict)  # env_version, seed, verifier, model, model_step

    def __post_init__(self) -> None:
        # Coerce, so that `is` comparisons hold whoever built the episode. "" is what logs
        # written before FinishReason existed hold for "never sampled".
        self.outcome = Outcome(self.outcome)
        self.finish_reason = FinishReason(self.finish_reason) if self.finish_reason else None

    @property
    def reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def is_error(self) -> bool:
        return self.outcome is Outcome.ERROR

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = str(self.outcome)  # plain strings: the dict is JSON and pickle data
        d["finish_reason"] = str(self.finish_reason or "")  # "" for None: the log format predates the enum
        d["reward"] = self.reward
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Episode":
        return cls(**{k: v for k, v in d.items() if k != "reward"})  # __post_init__ converts the enums
