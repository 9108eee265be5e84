"""The Sampler protocol: implemented in `trainers` (vLLM, Hugging Face, OpenAI-compatible HTTP),
consumed by rollouts in `envs`. Plain data in and out, so it can cross a process boundary."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


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


@dataclass(frozen=True)
class Sample:
    """One completion: exactly the token ids the model produced (never re-tokenized), each
    token's logprob under the sampler, and why it stopped ("stop" or "length")."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str


@runtime_checkable
class Sampler(Protocol):
    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        """For each prompt, `n` samples."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """What rollouts need of a tokenizer (a Hugging Face tokenizer fits)."""

    eos_token_id: int

    def apply_chat_template(self, conversation, **kwargs): ...

    def decode(self, token_ids, **kwargs) -> str: ...
