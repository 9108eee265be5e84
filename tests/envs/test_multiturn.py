"""The `MultiTurnEnv.respond` contract: a `TurnResult` per turn, what `respond` sees, per-episode
state reset, `max_turns` truncation, and a clear error for the old 4-tuple return."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rlvr import envs
from rlvr.envs.core import MultiTurnEnv, ProceduralTasks, Task, TurnResult, copy_messages
from rlvr.envs.sampler import FinishReason, Sample
from rlvr.verifiers.verdict import Outcome, Verdict


class EchoEnv(ProceduralTasks, MultiTurnEnv):
    """Say the task's word to win; every other turn is answered with the turn number."""

    def __init__(self, max_turns: int = 3):
        super().__init__(max_turns=max_turns)
        self.seen: list[str] = []

    def make_task(self, seed: int) -> Task:
        return Task(
            str(seed),
            [{"role": "user", "content": "say the word"}],
            answer=f"w{seed}",
            reference=f"w{seed}",
            wrong="no",
        )

    def _on_reset(self) -> None:
        super()._on_reset()
        self.seen = []

    def respond(self, action: str) -> TurnResult:
        self.seen.append(action)
        if action == self.task.answer:
            return TurnResult([{"role": "user", "content": "ignored: done"}], 1.0, True, Verdict(1.0, Outcome.CORRECT))
        if action == "crash":
            return TurnResult([], 0.0, False, Verdict(0.0, Outcome.ERROR, "grader down"))
        return TurnResult(
            [{"role": "user", "content": f"turn {self.turns}"}], 0.25, False, Verdict(0.25, Outcome.INCORRECT, "wrong")
        )


class TupleEnv(EchoEnv):
    """Still on the old hook shape."""

    def respond(self, action: str):
        return [], 1.0, True, Verdict(1.0, Outcome.CORRECT)


def test_turn_results_drive_the_episode():
    env = EchoEnv(max_turns=3)
    env.reset(options={"task_id": "5"})
    reply, reward, terminated, truncated, info = env.step("a")
    assert reply == [{"role": "user", "content": "turn 1"}] and reward == 0.25 and not (terminated or truncated)
    assert info["verdict"].outcome is Outcome.INCORRECT
    reply, reward, terminated, truncated, info = env.step("w5")
    assert reply == [] and reward == 1.0 and terminated and not truncated  # the reply of a final turn is dropped
    assert info["verdict"].outcome is Outcome.CORRECT and env.seen == ["a", "w5"]
    env.reset(options={"task_id": "5"})
    assert env.seen == [] and env.turns == 0  # _on_reset cleared the episode's state


def test_max_turns_truncates_but_keeps_errors():
    env = EchoEnv(max_turns=2)
    env.reset(seed=0)
    env.step("a")
    reply, reward, terminated, truncated, info = env.step("b")
    assert reply == [] and reward == 0.25 and truncated and not terminated
    assert info["verdict"].outcome is Outcome.TRUNCATED
    env.reset(seed=0)
    env.step("a")
    *_, truncated, info = env.step("crash")
    assert truncated and info["verdict"].outcome is Outcome.ERROR  # a grader failure stays an error


def test_tuple_from_respond_is_a_clear_type_error():
    env = TupleEnv()
    env.reset(seed=1)
    with pytest.raises(TypeError, match=r"TupleEnv\.respond must return envs\.TurnResult.*got tuple"):
        env.step("w1")
    gym.register(id="rlvrtest/TupleEnv-v0", entry_point=TupleEnv)
    try:
        wrapped = gym.make("rlvrtest/TupleEnv-v0")
        wrapped.reset(seed=1)
        with pytest.raises(TypeError, match="TupleEnv"):  # through Gymnasium's wrappers too
            wrapped.step("w1")
    finally:
        gym.registry.pop("rlvrtest/TupleEnv-v0")


def test_turn_result_is_frozen_and_exported():
    result = TurnResult([], 0.0, True, Verdict(0.0, Outcome.INCORRECT))
    with pytest.raises(AttributeError):
        result.done = False  # type: ignore[misc]
    assert envs.TurnResult is TurnResult and envs.FinishReason is FinishReason


def test_finish_reason_values_and_sample_coercion():
    assert [str(r) for r in FinishReason] == ["stop", "length"]
    sample = Sample((1, 2), (-0.1, -0.2), "length")  # a third-party sampler's plain string
    assert sample.finish_reason is FinishReason.LENGTH and sample.finish_reason == "length"
    with pytest.raises(ValueError):
        Sample((1,), (-0.1,), "abort")


def test_copy_messages_never_shares_what_a_caller_may_change():
    """Plain messages are copied dict by dict (the fast path); nested ones are deep-copied."""
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "name": None}]
    copied = copy_messages(plain)
    assert copied == plain and all(a is not b for a, b in zip(copied, plain))
    copied[0]["content"] = "changed"
    assert plain[0]["content"] == "hi"
    nested = [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]
    deep = copy_messages(nested)
    deep[0]["tool_calls"][0]["function"]["name"] = "g"
    assert nested[0]["tool_calls"][0]["function"]["name"] == "f"


def test_a_task_prompt_is_not_changed_by_its_episodes():
    env = envs.make("rlvr/Arithmetic-v0")
    messages, _ = env.reset(seed=3)
    task = env.unwrapped.task
    messages[0]["content"] = "tampered"
    assert task.prompt[0]["content"] != "tampered"
    again, _ = env.reset(seed=3, options={"task": task})
    assert again == task.prompt


class _Draws(ProceduralTasks, MultiTurnEnv):
    """Draws from `np_random` in each turn: what it draws shows which generator it had."""

    def make_task(self, seed: int) -> Task:
        return Task(str(seed), [{"role": "user", "content": "draw"}], seed, "", "")

    def respond(self, action: str) -> TurnResult:
        draw = int(self.np_random.integers(0, 2**31))
        return TurnResult([{"role": "user", "content": str(draw)}], 0.0, False, Verdict(0.0, Outcome.INCORRECT))


def test_a_seeded_reset_gives_the_generator_gymnasium_makes():
    """`np_random` is made when first used, and is then exactly the generator of an eager seeded
    reset: the same draws, the same `np_random_seed`, reseeded by every seeded reset only."""
    from gymnasium.utils import seeding

    env = _Draws()
    env.reset(seed=11)
    reference, seed = seeding.np_random(11)
    assert env.np_random_seed == seed == 11
    first = env.step("a")[0][0]["content"]
    assert first == str(reference.integers(0, 2**31))
    env.reset(seed=11, options={"task": env.task})  # reseeded: the same draw again
    assert env.step("a")[0][0]["content"] == first
    env.reset()  # no seed: the generator goes on, as gymnasium's does (drawing the next task's seed)
    assert env.task.task_id == str(reference.integers(0, 2**31 - 1))
    assert env.step("a")[0][0]["content"] == str(reference.integers(0, 2**31))
    env.reset(seed=12)
    env.reset()  # a seed not yet used is kept by an unseeded reset, which draws the task from it
    assert env.task.task_id == str(seeding.np_random(12)[0].integers(0, 2**31 - 1))
    env.np_random = seeding.np_random(5)[0]  # set by hand: gymnasium's rule, seed unknown (-1)
    assert env.np_random_seed == -1
    with pytest.raises(gym.error.Error, match="greater or equal to zero"):
        env.reset(seed=-1)  # a bad seed still fails at reset
