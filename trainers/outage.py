"""A run that produces nothing stops and says why.

An episode whose environment or grader failed is an `error` outcome and is never trained on (its
reward says nothing about the answer). A step whose every episode is an error therefore trains on
nothing. A few such steps in a row are an outage (a sandbox restarting): they are skipped and one
warning says how many, and the first error. A longer streak (`max_error_steps`, default 5) is a
broken environment (an environment written for an older API fails every episode the same way):
the run stops with one line naming the first error and its step, rather than running every step
at reward 0 and exiting as if it had trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.errors import RlvrError


class NothingProduced(RlvrError, RuntimeError):
    """Every episode was an `error` for too long: the message names the first error and its step."""


def error_message(episode: Any) -> str:
    """What went wrong in an `error` episode: the exception or the grader's own note."""
    metadata = getattr(episode, "metadata", None) or {}
    return str(metadata.get("error") or metadata.get("detail") or "no detail given")


def all_errors(episodes: Sequence[Any]) -> bool:
    """True when there are episodes and every one of them is an `error`."""
    return bool(episodes) and all(ep.is_error for ep in episodes)


@dataclass
class ErrorStreak:
    """Counts the steps in a row whose every episode was an error. `limit` such steps stop the run
    (0: never); a streak that ends sooner gives one warning line."""

    limit: int
    steps: int = 0
    first_step: int = 0
    first_error: str = ""

    def observe(self, step: int, episodes: Sequence[Any]) -> str | None:
        """After step `step` (1-based) sampled `episodes`: the warning when an outage just ended,
        None otherwise; `NothingProduced` when the streak reaches the limit."""
        if not all_errors(episodes):
            return self.end()
        if self.steps == 0:
            self.first_step, self.first_error = step, error_message(episodes[0])
        self.steps += 1
        if self.limit and self.steps >= self.limit:
            raise NothingProduced(
                f"every episode was an error for {self.steps} steps in a row (steps {self.first_step}-{step}, "
                f"max_error_steps {self.limit}): nothing to train on. The first, at step {self.first_step}: "
                f"{self.first_error}"
            )
        return None

    def end(self) -> str | None:
        """The warning for a streak in progress (which ends here), or None."""
        if self.steps == 0:
            return None
        last = self.first_step + self.steps - 1
        span = f"step {last}" if self.steps == 1 else f"steps {self.first_step}-{last}"
        text = (
            f"warning: every episode of {span} was an error: {self.steps} step(s) skipped, trained on "
            f"nothing. The first error, at step {self.first_step}: {self.first_error}"
        )
        self.steps = 0
        return text
