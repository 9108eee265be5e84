"""Environments for the tests of runs that train on nothing (tests/trainers/test_skipped_steps.py,
tests/rlvr/test_nothing_produced.py), made by module name (`run_test_envs:test/GraderOutage-v0`).

The verifiers count their calls per process and per `key` (each test passes its own), so that
"the first N verifications" means the first N of that run whichever environment copy makes them."""

from __future__ import annotations

import threading
from collections import Counter

import gymnasium

from rlvr.envs.tasks.arithmetic import ArithmeticEnv
from rlvr.envs.tasks.guess_number import GuessNumberEnv
from rlvr.verifiers.verdict import Outcome, Verdict

_LOCK = threading.Lock()
_CALLS: Counter = Counter()


def _call(key: str) -> int:
    """This call's number (0, 1, ...) among the verifications under `key` in this process."""
    with _LOCK:
        n = _CALLS[key]
        _CALLS[key] += 1
    return n


class GraderOutage(ArithmeticEnv):
    """Arithmetic whose grader is down (an `error` verdict, as a sandbox outage gives) for its first
    `outage` verifications, then grades as Arithmetic does."""

    def __init__(self, outage: int = 0, key: str = "", **kwargs):
        super().__init__(**kwargs)
        self.outage, self.key = outage, key

    def verify(self, task, response):
        if _call(self.key) < self.outage:
            return Verdict(0.0, Outcome.ERROR, "the grader is down (a stand-in outage)")
        return super().verify(task, response)


class FlatThenLearnable(ArithmeticEnv):
    """The same reward for every answer (0: no group has any variance, DAPO filters them all) for the
    first `flat` verifications; then a reward that differs between samples: 1 for an answer of odd
    length. Only the signal matters here, not what is learnt."""

    def __init__(self, flat: int = 0, key: str = "", **kwargs):
        super().__init__(**kwargs)
        self.flat, self.key = flat, key

    def verify(self, task, response):
        if _call(self.key) < self.flat:
            return Verdict(0.0, Outcome.INCORRECT, "flat")
        odd = len(response) % 2 == 1
        return Verdict(float(odd), Outcome.CORRECT if odd else Outcome.INCORRECT, "odd length" if odd else "even")


class OldApiGuessNumber(GuessNumberEnv):
    """GuessNumber written from an earlier README: `respond` returns the old 4-tuple
    (reply, reward, done, verdict), not an `envs.TurnResult`; every episode is an `error`."""

    def respond(self, action):
        result = super().respond(action)
        return result.reply, result.reward, result.done, result.verdict


gymnasium.register(id="test/GraderOutage-v0", entry_point=GraderOutage)
gymnasium.register(id="test/FlatThenLearnable-v0", entry_point=FlatThenLearnable)
gymnasium.register(id="test/OldApiGuessNumber-v0", entry_point=OldApiGuessNumber)
