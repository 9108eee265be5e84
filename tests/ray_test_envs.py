"""Environments for tests/trainers/samplers/test_ray_pool.py, made inside Ray rollout workers by module name
(`ray_test_envs:test/DiesOnce-v0`), and an agent they load the same way (`ray_test_envs:plan_then_answer`)."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium

from rlvr.envs.tasks.arithmetic import ArithmeticEnv


class DiesOnce(ArithmeticEnv):
    """Arithmetic, except that the first reset onto `seed` anywhere ends its whole process at once,
    as a worker killed mid-rollout would: `marker` (a file) records that it happened. A `marker`
    that is a directory means every such reset ends its process."""

    def __init__(self, marker: str = "", seed: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.marker, self.fatal_seed = Path(marker), seed

    def reset(self, *, seed=None, options=None):
        if seed == self.fatal_seed and self.marker.is_dir():
            os._exit(1)
        if seed == self.fatal_seed and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os._exit(1)
        return super().reset(seed=seed, options=options)


gymnasium.register(id="test/DiesOnce-v0", entry_point=DiesOnce)


class VerifiesInSandbox(ArithmeticEnv):
    """Arithmetic whose verifier also runs a program (sleeping `sleep_s`, then printing 42) on the
    process's shared sandbox: correct when that program ran and printed 42, an error verdict when
    the sandbox could not run it. The verdict names the sandbox's type."""

    def __init__(self, sleep_s: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.sleep_s = sleep_s

    def verify(self, task, response):
        from rlvr import sandbox
        from rlvr.verifiers.verdict import Outcome, Verdict

        box = sandbox.shared_sandbox()
        program = f"import time; time.sleep({self.sleep_s}); print(6 * 7)"
        result = box.run({"main.py": program}, ["python3", "main.py"])
        info = {"verifier": type(box).__name__}
        if result.status is sandbox.Status.UNAVAILABLE:
            return Verdict(0.0, Outcome.ERROR, result.detail, info)
        return (
            Verdict(1.0, Outcome.CORRECT, "", info)
            if result.stdout == "42\n"
            else Verdict(0.0, Outcome.INCORRECT, result.stdout[:80], info)
        )


gymnasium.register(id="test/VerifiesInSandbox-v0", entry_point=VerifiesInSandbox)


async def plan_then_answer(client, task):
    """A two-call agent (`rlvr/Agent-v0`): an answer, then a follow-up in the same conversation."""
    messages = list(task.prompt)
    plan = await client.chat.completions.create(model="policy", messages=messages)
    messages += [
        {"role": "assistant", "content": plan.choices[0].message.content},
        {"role": "user", "content": "Now give only the final answer, in \\boxed{}."},
    ]
    answer = await client.chat.completions.create(model="policy", messages=messages)
    return answer.choices[0].message.content
