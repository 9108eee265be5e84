"""A third-party rlvr environment: reverse a word. Registered by `register()`, which the
`rlvr.envs` entry point names."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlvr.envs import ProceduralTasks, SingleTurnEnv, Task
from rlvr.verifiers import Outcome, Verdict

WORDS = ["gymnasium", "verifier", "sandbox", "reward", "policy", "rollout", "episode", "sampler"]


class ReverseWordEnv(ProceduralTasks, SingleTurnEnv):
    """Spell a word backwards; exact match scores 1."""

    def make_task(self, seed: int) -> Task:
        word = WORDS[int(np.random.default_rng(seed).integers(len(WORDS)))]
        return Task(
            str(seed),
            [{"role": "user", "content": f"Spell {word!r} backwards."}],
            answer=word[::-1],
            reference=word[::-1],
            wrong=word,
        )

    def verify(self, task: Task, response: str) -> Verdict:
        ok = response.strip() == task.answer
        return Verdict(float(ok), Outcome.CORRECT if ok else Outcome.INCORRECT)


def register() -> None:
    gym.register(id="rlvrdemo/ReverseWord-v0", entry_point="rlvr_demo_plugin:ReverseWordEnv")
