"""Per-episode rollouts on real vLLM: each episode advances on its own (its next turn is submitted
as soon as its environment has stepped), with the same episodes, groups and token exactness as
the lockstep schedule."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import pytest

from rlvr.envs.core import MultiTurnEnv, ProceduralTasks, Task, TurnResult
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.sampler import RequestSampler, SamplingSettings
from rlvr.envs.tasks.guess_number import GuessNumberEnv
from rlvr.verifiers.verdict import Outcome, Verdict
from tests.envs.test_rollout import assert_token_exact

RELAY_WAIT_S = 5.0  # per episode: room for task 1's three turns on a loaded machine
# In lockstep the baton cannot come while task 0's step holds the turn, however long it waits: a
# short wait shows that as well (5 s of waiting was a fifth of this module's time).
LOCKSTEP_WAIT_S = 0.5


class RelayEnv(ProceduralTasks, MultiTurnEnv):
    """Two kinds of task. On task 0 the first step waits (at most `wait_s`) for a baton that
    task 1 hands over on its third step: in lockstep, task 1 cannot reach its third turn while
    task 0's first step is still running, so the wait runs out and task 0 ends `error`; per
    episode, task 1 runs on and hands the baton over."""

    grade_truncated = True  # its turns may be cut at max_tokens: this env pays the scheduling, not the text
    baton: threading.Event  # set per test: the two episodes of a rollout share it
    wait_s: float = RELAY_WAIT_S  # set per test

    def make_task(self, seed: int) -> Task:
        return Task(str(seed), [{"role": "user", "content": f"Relay leg {seed}. Say anything."}], seed, "ok", "")

    def respond(self, action: str) -> TurnResult:
        if self.task.answer == 0:
            if not RelayEnv.baton.wait(RelayEnv.wait_s):
                return TurnResult([], 0.0, True, Verdict(0.0, Outcome.ERROR, "the baton never came"))
            return TurnResult([], 1.0, True, Verdict(1.0, Outcome.CORRECT))
        if self.turns == 3:
            RelayEnv.baton.set()
            return TurnResult([], 1.0, True, Verdict(1.0, Outcome.CORRECT))
        return TurnResult([{"role": "user", "content": "Go on."}], 0.0, False, Verdict(0.0, Outcome.INCORRECT))


gym.register("rlvr-test/Relay-v0", entry_point=RelayEnv)


class RecordingRequests:
    """The real engine, with each request's prompt and samples kept (in `generate`'s call format)."""

    def __init__(self, inner):
        self.inner, self.calls, self._prompts = inner, [], {}
        self.max_model_len = inner.max_model_len

    def generate(self, prompt_token_ids, n, sampling):
        return self.inner.generate(prompt_token_ids, n, sampling)

    def submit(self, prompt_token_ids, n, sampling):
        key = self.inner.submit(prompt_token_ids, n, sampling)
        self._prompts[key] = (list(prompt_token_ids), n)
        return key

    def poll(self):
        done = self.inner.poll()
        for key, samples in done:
            prompt, n = self._prompts.pop(key)
            self.calls.append(([prompt], n, [samples]))
        return done

    def unfinished(self):
        return self.inner.unfinished()

    def cancel(self):
        self.inner.cancel()


@pytest.fixture
def engine(tiny_engine):
    """The folder's vLLM engine (tests/envs/conftest.py), shared with test_rollout.py; each test
    leaves it with no request unfinished."""
    yield tiny_engine
    assert tiny_engine.unfinished() == 0


def test_single_turn_episodes_are_the_same_in_both_schedules(engine, tokenizer):
    """Turn 1 is seeded alike in both schedules: the same tokens, logprobs and rewards."""
    assert isinstance(engine, RequestSampler)
    request = RolloutRequest("rlvr/Arithmetic-v0", {}, range(5), 3, SamplingSettings(max_tokens=16, seed=4))
    lockstep = rollout(request, engine, tokenizer, per_episode=False, progress=False)
    each = rollout(request, engine, tokenizer, progress=False)  # the default with vLLM
    assert engine.unfinished() == 0
    for a, b in zip(lockstep, each, strict=True):
        assert (a.task_id, a.group_id) == (b.task_id, b.group_id)
        for x, y in zip(a.episodes, b.episodes, strict=True):
            assert x.completion_ids == y.completion_ids and x.reward == y.reward and x.outcome is y.outcome
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-5)


def test_multi_turn_episodes_are_token_exact(engine, tokenizer):
    sampler = RecordingRequests(engine)
    groups = rollout(
        RolloutRequest(
            "rlvr/GuessNumber-v0",
            {"n": 20, "max_turns": 3},
            seeds=[3, 4, 5],
            group_size=3,
            sampling=SamplingSettings(max_tokens=8, seed=1),
        ),
        sampler,
        tokenizer,
        progress=False,
    )
    episodes = [ep for g in groups for ep in g.episodes]
    assert [g.group_id for g in groups] == [0, 1, 2] and all(len(g.episodes) == 3 for g in groups)
    assert max(ep.metadata["turns"] for ep in episodes) > 1  # several turns were played
    for ep in episodes:
        assert_token_exact(ep, sampler.calls, tokenizer)
    # turn 1 is one request per group (n = G), each later turn one request per episode (n = 1)
    assert len(sampler.calls) == 3 + sum(ep.metadata["turns"] - 1 for ep in episodes)
    again = rollout(
        RolloutRequest(
            "rlvr/GuessNumber-v0",
            {"n": 20, "max_turns": 3},
            seeds=[3, 4, 5],
            group_size=3,
            sampling=SamplingSettings(max_tokens=8, seed=1),
        ),
        engine,
        tokenizer,
        progress=False,
    )
    assert [ep.completion_ids for g in again for ep in g.episodes] == [ep.completion_ids for ep in episodes]


@pytest.mark.parametrize("per_episode", [True, False])
def test_a_slow_step_holds_only_its_own_episode(engine, tokenizer, per_episode):
    RelayEnv.baton = threading.Event()
    RelayEnv.wait_s = RELAY_WAIT_S if per_episode else LOCKSTEP_WAIT_S
    groups = rollout(
        RolloutRequest(
            "rlvr-test/Relay-v0",
            {"max_turns": 5},
            seeds=[0, 1],
            group_size=1,
            sampling=SamplingSettings(max_tokens=4, seed=0),
        ),
        engine,
        tokenizer,
        progress=False,
        per_episode=per_episode,
    )
    slow, fast = (g.episodes[0] for g in groups)
    assert fast.outcome is Outcome.CORRECT and fast.metadata["turns"] == 3
    if per_episode:
        assert slow.outcome is Outcome.CORRECT  # the other episode ran on while this one waited
    else:
        assert slow.outcome is Outcome.ERROR and "baton" in slow.metadata["error"]


class SlowGuessEnv(GuessNumberEnv):
    """GuessNumber whose every step waits 30 ms (a sandbox, a remote tool)."""

    def respond(self, action: str) -> TurnResult:
        time.sleep(0.03)
        return super().respond(action)


gym.register("rlvr-test/SlowGuess-v0", entry_point=SlowGuessEnv)


class Timeline(RecordingRequests):
    """The real engine; for each later turn's request, whether the turn before it finished in the
    poll just before its submission (its steps waited for) or earlier (the engine went on)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.finished_last_poll: set[tuple[int, ...]] = set()  # prompt + sample of each
        self.next_turn_waited_for: list[bool] = []

    def submit(self, prompt_token_ids, n, sampling):
        prompt = tuple(prompt_token_ids)
        if self.calls:  # a later turn: does it continue a sample of the last poll?
            self.next_turn_waited_for.append(any(prompt[: len(f)] == f for f in self.finished_last_poll))
        return super().submit(prompt_token_ids, n, sampling)

    def poll(self):
        done = super().poll()
        self.finished_last_poll = {
            tuple(self.calls[i][0][0]) + tuple(s.token_ids)
            for i in range(len(self.calls) - len(done), len(self.calls))
            for s in self.calls[i][2][0]
        }
        return done


@pytest.mark.parametrize("env_id", ["rlvr/GuessNumber-v0", "rlvr-test/SlowGuess-v0"])
def test_the_engine_waits_for_quick_steps_only(engine, tokenizer, env_id):
    """Quick steps are waited for: every next turn joins the engine's very next step. Steps that
    wait on something (30 ms here) are not: after the first round the engine goes on without them.
    Quick is judged by timing, and a pause of the machine (a collection, another process) can end
    the waiting early: three rollouts, of which one must wait for every step."""
    kwargs = dict(seeds=range(8), group_size=2, sampling=SamplingSettings(max_tokens=8, seed=3))
    request = RolloutRequest("rlvr/GuessNumber-v0", {"n": 50, "max_turns": 2}, **kwargs)
    rollout(request, engine, tokenizer, progress=False)  # compiles the template
    timelines = []
    for _ in range(3):
        timelines.append(Timeline(engine))
        groups = rollout(
            RolloutRequest(env_id, {"n": 50, "max_turns": 4}, **kwargs), timelines[-1], tokenizer, progress=False
        )
        assert sum(ep.metadata["turns"] > 1 for g in groups for ep in g.episodes) >= 4  # later turns were played
    waited = [t.next_turn_waited_for for t in timelines]
    assert all(waited)
    if env_id == "rlvr/GuessNumber-v0":
        assert any(all(w) for w in waited)
    else:
        assert not any(all(w) for w in waited)


class CrashingPoll(RecordingRequests):
    """The real engine, whose second `poll` fails (a sampler crash) while requests are generating."""

    def poll(self):
        self.polls = getattr(self, "polls", 0) + 1
        if self.polls == 2:
            raise RuntimeError("sampler crashed")
        return super().poll()


def test_a_failing_rollout_leaves_no_request_behind(engine, tokenizer):
    """The error reaches the caller, and the engine keeps no request for the next `generate`."""
    with pytest.raises(RuntimeError, match="sampler crashed"):
        rollout(
            RolloutRequest(
                "rlvr/GuessNumber-v0", {"n": 20}, seeds=[1, 2], group_size=2, sampling=SamplingSettings(max_tokens=8)
            ),
            CrashingPoll(engine),
            tokenizer,
            progress=False,
        )
    assert engine.unfinished() == 0
    out = engine.generate([[1, 2, 3]], 2, SamplingSettings(max_tokens=4, seed=0))
    assert len(out) == 1 and len(out[0]) == 2


def test_per_episode_needs_a_request_sampler(tokenizer, hf_model):
    from rlvr.trainers.samplers import HFSampler

    with pytest.raises(TypeError, match="RequestSampler"):
        rollout(
            RolloutRequest("rlvr/Arithmetic-v0", {}, seeds=[1], group_size=1, sampling=SamplingSettings(max_tokens=4)),
            HFSampler(hf_model, tokenizer),
            tokenizer,
            per_episode=True,
        )
