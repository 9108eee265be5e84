"""Importing this module registers `rlvrdemo/Upper-v0` (the module form of an entry point)."""

from __future__ import annotations

import gymnasium as gym

from rlvr.envs import ProceduralTasks, SingleTurnEnv, Task
from rlvr.verifiers import Outcome, Verdict


class UpperEnv(ProceduralTasks, SingleTurnEnv):
    """Write a word in capital letters."""

    def make_task(self, seed: int) -> Task:
        word = f"word{seed % 97}"
        return Task(
            str(seed),
            [{"role": "user", "content": f"Write {word} in capitals."}],
            answer=word.upper(),
            reference=word.upper(),
            wrong=word,
        )

    def verify(self, task: Task, response: str) -> Verdict:
        ok = response.strip() == task.answer
        return Verdict(float(ok), Outcome.CORRECT if ok else Outcome.INCORRECT)


gym.register(id="rlvrdemo/Upper-v0", entry_point=UpperEnv)
