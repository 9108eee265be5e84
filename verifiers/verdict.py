"""The verdict every verifier returns: the contract between verifiers and environments."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rlvr.errors import RlvrError


class Outcome(StrEnum):
    """Typed result of checking one answer. `ERROR` means the grader failed, not the model."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    FORMAT_ERROR = "format_error"
    TRUNCATED = "truncated"
    ERROR = "error"


@dataclass(frozen=True)
class Verdict:
    """`score` in [0, 1]; `detail` is a short human-readable reason; `info` holds extras
    (per-test outcomes, reward components) and must stay picklable plain data."""

    score: float
    outcome: Outcome
    detail: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"Verdict.score must be in [0, 1], got {self.score!r}")
        object.__setattr__(self, "outcome", Outcome(self.outcome))

    @property
    def is_error(self) -> bool:
        return self.outcome is Outcome.ERROR

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "outcome": str(self.outcome), "detail": self.detail, "info": self.info}


class VerifierError(RlvrError):
    """Raised for misuse of a verifier (bad arguments), never for a wrong answer."""
