"""`rlvr/GuessNumber-v0`: a small multi-turn game that exercises the multi-turn contract without a
sandbox. The environment picks a secret integer in [1, n]; each turn the model guesses and the
environment replies "higher" (the secret is higher than the guess) or "lower".

Knobs: `n` (the range, default 100), `max_turns` (default `n.bit_length()`, exactly what binary
search needs in the worst case), `reward`:
  - "final" (default): only the final guess is rewarded, 1 if it is the secret, else 0;
  - "per_turn": every turn is rewarded with the fraction of the still-possible numbers that the
    guess rules out (1 for the secret; 0 for a guess that earlier replies had already ruled out).
A reply with no number in it is a format error turn (reward 0) that still uses up a turn; the
guess is the last number in the reply.
"""

from __future__ import annotations

import re
from typing import ClassVar

import numpy as np

from rlvr.envs.core import MultiTurnEnv, ProceduralTasks, Task, TurnResult
from rlvr.verifiers.verdict import Outcome, Verdict

PROMPT = (
    "I am thinking of an integer between 1 and {n}. Guess it in at most {turns} turns. "
    'Reply with one integer. After each wrong guess I answer "higher" if my number is higher than '
    'your guess or "lower" if it is lower.'
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MAX_DIGITS = 18  # longer "numbers" are format errors rather than giant ints


def parse_guess(text: str) -> int | str:
    """The last number in `text` as an int, or a short reason why there is no valid guess."""
    last = None
    for match in _NUMBER.finditer(text):
        last = match
    if last is None:
        return "no number in the reply"
    token = last.group(0)
    if "." in token:
        return f"{token} is not an integer"
    if len(token.lstrip("-")) > _MAX_DIGITS:
        return "the number is too long"
    return int(token)


class GuessNumberEnv(ProceduralTasks, MultiTurnEnv):
    """Multi-turn number guessing in [1, n]: the env replies "higher"/"lower", the final guess is rewarded."""

    version: ClassVar[str] = "0"
    REWARDS: ClassVar[tuple[str, ...]] = ("final", "per_turn")

    def __init__(
        self, n: int = 100, max_turns: int | None = None, reward: str = "final", render_mode: str | None = None
    ):
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 10**12:
            raise ValueError(f"n must be an integer in [2, 10**12], got {n!r}")
        if reward not in self.REWARDS:
            raise ValueError(f"reward must be one of {self.REWARDS}, got {reward!r}")
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int)):
            raise ValueError(f"max_turns must be an integer, got {max_turns!r}")
        super().__init__(max_turns=n.bit_length() if max_turns is None else max_turns, render_mode=render_mode)
        self.n = n
        self.reward_mode = reward
        self._lo, self._hi = 1, n  # the numbers still consistent with the replies so far

    def make_task(self, seed: int) -> Task:
        secret = int(np.random.default_rng([seed, self.n]).integers(1, self.n + 1))
        return Task(
            task_id=str(seed),
            prompt=[{"role": "user", "content": PROMPT.format(n=self.n, turns=self.max_turns)}],
            answer=secret,
            reference=str(secret),
            wrong="0",
            metadata={"n": self.n},
        )

    def _on_reset(self) -> None:
        super()._on_reset()
        self._lo, self._hi = 1, self.n

    def respond(self, action: str) -> TurnResult:
        guess = parse_guess(action)
        if isinstance(guess, str):
            hint = [{"role": "user", "content": f"Reply with one integer between 1 and {self.n}."}]
            return TurnResult(hint, 0.0, False, Verdict(0.0, Outcome.FORMAT_ERROR, guess))
        secret = self.task.answer
        if guess == secret:
            return TurnResult([], 1.0, True, Verdict(1.0, Outcome.CORRECT, f"guessed {secret} in {self.turns} turns"))
        before = self._hi - self._lo + 1
        if secret > guess:
            self._lo = max(self._lo, guess + 1)
        else:
            self._hi = min(self._hi, guess - 1)
        score = (before - (self._hi - self._lo + 1)) / before if self.reward_mode == "per_turn" else 0.0
        word = "higher" if secret > guess else "lower"
        return TurnResult(
            [{"role": "user", "content": word}], score, False, Verdict(score, Outcome.INCORRECT, f"{guess}: {word}")
        )

    def reference_action(self) -> str:
        """Binary search: the middle of the numbers still possible."""
        return str((self._lo + self._hi) // 2)

    def wrong_action(self) -> str:
        """A number the replies have already ruled out (0 at the start): always wrong, rules out nothing."""
        return str(self._lo - 1)
