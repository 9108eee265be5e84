"""The checker finds each kind of broken environment and names the problem.

Each environment here is a real TextEnv with one deliberate defect; a sound baseline passes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rlvr import envs
from rlvr.envs import EnvCheckError, ProceduralTasks, SingleTurnEnv, Task
from rlvr.verifiers.verdict import Outcome, Verdict


class EchoEnv(ProceduralTasks, SingleTurnEnv):
    """Repeat a number; exact match scores 1 (the sound baseline)."""

    def make_task(self, seed: int) -> Task:
        n = int(np.random.default_rng(seed).integers(1000))
        return Task(str(seed), [{"role": "user", "content": f"Say {n}."}], str(n), str(n), str(n + 1))

    def verify(self, task: Task, response: str) -> Verdict:
        ok = response.strip() == task.answer
        return Verdict(float(ok), Outcome.CORRECT if ok else Outcome.INCORRECT)


class NondeterministicEnv(EchoEnv):
    """Draws its task from a global RNG, so the seed does not fix the task."""

    _global = np.random.default_rng()

    def sample_task(self, rng):
        return self.make_task(int(self._global.integers(1 << 30)))


class OutOfRangeEnv(EchoEnv):
    """Declares rewards in [0, 1] but pays 2 for a right answer."""

    def _step(self, action):
        reply, reward, term, trunc, verdict = super()._step(action)
        return reply, reward * 2, term, trunc, verdict


class LenientEnv(EchoEnv):
    """Accepts anything: the known-bad answer scores full marks."""

    def verify(self, task, response):
        return Verdict(1.0, Outcome.CORRECT)


class WrongReferenceEnv(EchoEnv):
    """Its reference answer is not actually accepted."""

    def make_task(self, seed):
        t = super().make_task(seed)
        return Task(t.task_id, t.prompt, t.answer, reference="I don't know", wrong=t.wrong)


class UnpicklableEnv(EchoEnv):
    """Holds a lock, which cannot be pickled."""

    def __init__(self, render_mode=None):
        super().__init__(render_mode=render_mode)
        self.lock = threading.Lock()


class IgnoresTaskIdEnv(EchoEnv):
    """Ignores options={"task_id": ...}: copies of a group get different tasks."""

    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed)


def _failed(env) -> dict[str, tuple[str, ...]]:
    with pytest.raises(EnvCheckError) as err:
        envs.check_env(env)
    return {r.name: r.problems for r in err.value.results if not r.ok}


def test_sound_env_passes_all_checks():
    results = envs.check_env(EchoEnv())
    assert [r.ok for r in results] == [True] * 8


def test_nondeterministic_env_fails_determinism():
    failed = _failed(NondeterministicEnv())
    assert "determinism per seed" in failed
    assert "gymnasium env_checker" in failed  # Gymnasium's own reset-determinism assertion


def test_out_of_range_rewards_are_reported():
    failed = _failed(OutOfRangeEnv())
    assert any("outside reward_range (0.0, 1.0)" in p for p in failed["rewards within reward_range"])
    assert "known-good answer gets the max reward" in failed  # 2.0, not 1.0


def test_lenient_verifier_fails_known_bad():
    failed = _failed(LenientEnv())
    assert list(failed) == ["known-bad answer gets the min reward"]
    assert "judged correct" in " ".join(failed["known-bad answer gets the min reward"])


def test_wrong_reference_fails_known_good():
    failed = _failed(WrongReferenceEnv())
    assert "known-good answer gets the max reward" in failed


def test_unpicklable_env_fails_pickle_check():
    failed = _failed(UnpicklableEnv())
    assert "picklable" in failed and "lock" in failed["picklable"][0]


def test_group_clones_must_share_the_task():
    failed = _failed(IgnoresTaskIdEnv())
    assert "group clones identical" in failed and "determinism per seed" in failed


def test_every_failure_is_listed_in_one_error():
    with pytest.raises(EnvCheckError) as err:
        envs.check_env(OutOfRangeEnv())
    message = str(err.value)
    assert message.startswith("OutOfRangeEnv failed 2 of 8 checks:")
    assert "FAIL  rewards within reward_range" in message and "FAIL  known-good" in message


def test_non_text_env_is_rejected_clearly():
    import gymnasium as gym

    results = envs.check_env(gym.make("CartPole-v1"), raise_on_failure=False)
    assert len(results) == 1 and not results[0].ok and "not a TextEnv" in results[0].problems[0]
