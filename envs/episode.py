"""An episode: what the model did in an environment, token-exact, plus what reproduces it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from rlvr.envs.sampler import FinishReason
from rlvr.verifiers.verdict import Outcome


class TruncationReason(StrEnum):
    """Why an episode ended `truncated`: `turns`, the environment's turn limit (a failure to
    solve in time); `context`, the prompt or the next turn did not fit in the model's context;
    `length`, the last turn used up its `max_tokens` budget (the answer is cut)."""

    TURNS = "turns"
    CONTEXT = "context"
    LENGTH = "length"


# What `envs.rollout` wrote in `metadata["detail"]` for a context cut before the typed reason
# existed: old logs are read with it.
_CONTEXT_NOTES = ("would not fit in the context", "does not fit in the context")


def legacy_truncation(outcome: Outcome, finish_reason: Any, detail: Any) -> TruncationReason | None:
    """The reason of a `truncated` episode logged without one, from its finish reason and note."""
    if Outcome(outcome) is not Outcome.TRUNCATED:
        return None
    if any(note in str(detail or "") for note in _CONTEXT_NOTES):
        return TruncationReason.CONTEXT
    if finish_reason and FinishReason(finish_reason) is FinishReason.LENGTH:
        return TruncationReason.LENGTH
    return TruncationReason.TURNS


@dataclass
class Episode:
    """`prompt_ids` are the opening prompt's tokens. `completion_ids` are everything after it:
    the model's tokens exactly as sampled, interleaved (multi-turn) with the environment's reply
    tokens; `loss_mask[i]` is 1 exactly where `completion_ids[i]` came from the model, and
    `logprobs[i]` is the sampler's logprob there (0.0 elsewhere). `finish_reason` is how the
    last model turn ended, None when the model never sampled (the prompt did not fit; "" in
    `to_dict`). `truncation` says why a `truncated` episode was cut (None for other outcomes;
    "" in `to_dict`).
    Strings given for `outcome`, `finish_reason` and `truncation` (JSONL logs) are converted to the
    enums; a log written before `truncation` existed gets it from the finish reason and the note."""

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
    truncation: TruncationReason | None = None
    # Per completion token: the policy version that sampled it (-1 on the environment's tokens);
    # empty when the sampler does not track versions.
    versions: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Coerce, so that `is` comparisons hold whoever built the episode. "" is what logs
        # written before FinishReason existed hold for "never sampled".
        self.outcome = Outcome(self.outcome)
        self.finish_reason = FinishReason(self.finish_reason) if self.finish_reason else None
        self.truncation = TruncationReason(self.truncation) if self.truncation else None

    @property
    def reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def is_error(self) -> bool:
        return self.outcome is Outcome.ERROR

    @property
    def segment(self) -> int:
        """Which training sequence of its episode this is: 0, except for an agent episode whose agent
        rewrote its history (`envs.agent.calls`), whose later segments are 1, 2, ... Statistics
        count an episode once, by its segment 0 (every segment carries the episode's reward)."""
        return int(self.metadata.get("segment", 0))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = str(self.outcome)  # plain strings: the dict is JSON and pickle data
        d["finish_reason"] = str(self.finish_reason or "")  # "" for None: the log format predates the enum
        d["truncation"] = str(self.truncation or "")
        d["reward"] = self.reward
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        values = {k: v for k, v in d.items() if k != "reward"}  # __post_init__ converts the enums
        if "truncation" not in values:  # a log older than the typed reason
            values["truncation"] = legacy_truncation(
                values["outcome"], values.get("finish_reason"), (values.get("metadata") or {}).get("detail")
            )
        return cls(**values)
