"""The Sampler protocol: implemented in `trainers` (vLLM, Hugging Face, OpenAI-compatible HTTP),
consumed by rollouts in `envs`. Plain data in and out, so it can cross a process boundary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_tokens < 1:
            raise ValueError(f"bad sampling settings: {self}")


class FinishReason(StrEnum):
    """Why a completion ended, in the vocabulary vLLM and OpenAI-compatible servers use. A
    StrEnum, so it compares equal to and serialises as the plain string ("stop", "length")."""

    STOP = "stop"  # eos, a stop string or a stop token
    LENGTH = "length"  # the `max_tokens` budget ran out


@dataclass(frozen=True)
class Sample:
    """One completion: exactly the token ids the model produced (never re-tokenized), each
    token's logprob under the sampler, and why it stopped. A plain string finish reason is
    converted (so third-party samplers may still pass "stop"); an unknown one is a ValueError.
    `versions`, when the sampler tracks them, is the policy version (the trainer's count of weight
    updates) of the weights that sampled each token: with weights updated while it samples, one
    completion's tokens can span versions. Empty: not tracked."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    versions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "finish_reason", FinishReason(self.finish_reason))
        if self.versions and len(self.versions) != len(self.token_ids):
            raise ValueError(f"{len(self.versions)} versions for {len(self.token_ids)} tokens")


@runtime_checkable
class Sampler(Protocol):
    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        """For each prompt, `n` samples."""
        ...


@runtime_checkable
class RequestSampler(Sampler, Protocol):
    """A sampler that also takes requests one at a time (vLLM's engine does): rollouts then advance
    each episode on its own, submitting its next turn as soon as its environment has stepped,
    while other episodes are still generating."""

    def submit(self, prompt_token_ids: Sequence[int], n: int, sampling: SamplingSettings) -> str:
        """Queue one prompt for `n` samples; returns the request's key."""
        ...

    def poll(self) -> list[tuple[str, list[Sample]]]:
        """Advance generation one step; the requests that finished, as (key, samples)."""
        ...

    def unfinished(self) -> int:
        """Requests submitted and not yet returned by `poll`."""
        ...

    def cancel(self) -> None:
        """Drop every unfinished request (a rollout that failed part-way calls it)."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """What rollouts need of a tokenizer (a Hugging Face tokenizer fits)."""

    eos_token_id: int

    def apply_chat_template(self, conversation, **kwargs): ...

    def decode(self, token_ids, **kwargs) -> str: ...
