"""`AgentEnv` (`rlvr/Agent-v0`): an agent program as a Gymnasium env that `envs.rollout` plays through the
gateway; real HTTP, the real `openai` client, the tiny model."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rlvr.envs import check_env, list_envs
from rlvr.envs.agent.env import AgentEnv, load_agent, one_call
from rlvr.envs.registry import EnvArgumentError
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.sampler import SamplingSettings
from rlvr.envs.tasks.arithmetic import ArithmeticEnv
from rlvr.trainers.models import load_causal_lm
from rlvr.trainers.samplers import HFSampler
from rlvr.verifiers.verdict import Outcome
from tests.envs.agent.test_gateway import FOLLOW_UP  # (its import registers rlvr-test/PlanThenAnswer-v0)

SAMPLING = SamplingSettings(max_tokens=12, seed=7)


@pytest.fixture(scope="module")
def hf_sampler(model_dir, tokenizer):
    return HFSampler(load_causal_lm(model_dir), tokenizer)


async def plan_then_answer(client, task):
    """Two calls in one conversation, no settings of its own (the rollout's apply); the answer is graded."""
    messages = list(task.prompt)
    plan = await client.chat.completions.create(model="policy", messages=messages)
    messages += [{"role": "assistant", "content": plan.choices[0].message.content}, FOLLOW_UP]
    answer = await client.chat.completions.create(model="policy", messages=messages)
    return answer.choices[0].message.content


async def planner_and_solver(client, task):
    """Two conversations: the solver sees the planner's notes in a system message (a rewritten history)."""
    plan = await client.chat.completions.create(model="policy", messages=list(task.prompt))
    notes = {"role": "system", "content": f"Notes: {plan.choices[0].message.content}"}
    answer = await client.chat.completions.create(model="policy", messages=[notes, *task.prompt])
    return answer.choices[0].message.content


def not_async(client, task):
    return 1.0


def test_agent_env_meets_the_gymnasium_contract():
    env = gym.make("rlvr/Agent-v0", task_args={"difficulty": 1})
    assert env.unwrapped.agent is one_call and env.unwrapped.kind == "agent"
    messages, info = env.reset(seed=3)
    task = ArithmeticEnv(difficulty=1).make_task(3)
    assert messages == task.prompt and info["task_id"] == "3"
    _, reward, terminated, _, info = env.step(task.reference)  # a final answer, graded by Arithmetic's verifier
    assert (reward, terminated, info["verdict"].outcome) == (1.0, True, Outcome.CORRECT)
    assert all(r.ok for r in check_env(env))
    env.close()
    assert {i.id: i.kind for i in list_envs()}["rlvr/Agent-v0"] == "agent"


def test_the_agent_is_named_by_module_or_file(tmp_path):
    assert load_agent("tests.envs.agent.test_env:plan_then_answer") is plan_then_answer
    (tmp_path / "my_agent.py").write_text("async def run(client, task):\n    return 1.0\n")
    assert load_agent(f"{tmp_path}/my_agent.py:run").__name__ == "run"
    assert load_agent(f"{tmp_path}/my_agent.py:run") is load_agent(f"{tmp_path}/my_agent.py:run")  # loaded once
    for bad, says in [
        ("plan_then_answer", "must be 'module:function'"),
        ("tests.envs.agent.test_env:missing", "AttributeError"),
        (f"{tmp_path}/nowhere.py:run", "no file"),
        (not_async, "must be an async function"),
        ("tests.envs.agent.test_env:not_async", "must be an async function"),
    ]:
        with pytest.raises(EnvArgumentError, match=says):
            load_agent(bad)
    with pytest.raises(EnvArgumentError, match="single-step"):
        AgentEnv(tasks="rlvr/GuessNumber-v0")


def test_a_rollout_of_the_agent_is_the_hand_built_multi_turn_episode(hf_sampler, tokenizer):
    """One task, one episode, seeded: the gateway seeds call k as the rollout seeds turn k, so the
    agent's episode is, token for token and logprob for logprob, the turn-based episode of the env
    that plays the same two turns (the rollout's own settings apply to calls that name none)."""
    kwargs = {"agent": plan_then_answer}  # Arithmetic at its default difficulty, as the hand-built env
    (agent_group,) = rollout(
        RolloutRequest("rlvr/Agent-v0", kwargs, seeds=[5], group_size=1, sampling=SAMPLING), hf_sampler, tokenizer
    )
    (hand_group,) = rollout(
        RolloutRequest("rlvr-test/PlanThenAnswer-v0", {}, seeds=(), task_ids=["5"], group_size=1, sampling=SAMPLING),
        hf_sampler,
        tokenizer,
    )
    (agent,), (hand,) = agent_group.episodes, hand_group.episodes
    assert agent.prompt_ids == hand.prompt_ids and agent.completion_ids == hand.completion_ids
    assert agent.loss_mask == hand.loss_mask and agent.logprobs == hand.logprobs
    assert 0 in agent.loss_mask and agent.metadata["turns"] == 2 and agent.segment == 0
    assert (agent.reward, agent.outcome) == (hand.reward, hand.outcome)
    assert agent.metadata["seed"] == 5 and agent.metadata["sampling"]["max_tokens"] == SAMPLING.max_tokens


def test_an_agent_that_rewrote_its_history_counts_once_and_rollouts_repeat(hf_sampler, tokenizer):
    kwargs = {"agent": planner_and_solver, "task_args": {"difficulty": 1}}

    def play():
        return rollout(
            RolloutRequest("rlvr/Agent-v0", kwargs, seeds=[1, 2], group_size=2, sampling=SAMPLING, group_id_start=3),
            hf_sampler,
            tokenizer,
        )

    groups = play()
    assert [g.group_id for g in groups] == [3, 4]
    for g in groups:
        assert [ep.segment for ep in g.episodes] == [0, 1, 0, 1]  # each episode: planner, then solver
        assert len(g.rewards) == 2 and g.num_errors == 0  # counted once per episode
        assert g.episodes[0].reward == g.episodes[1].reward and g.episodes[2].reward == g.episodes[3].reward
    again = play()  # seeded: the same calls, whatever order the four agents' calls came in
    assert [[ep.completion_ids for ep in g.episodes] for g in again] == [
        [ep.completion_ids for ep in g.episodes] for g in groups
    ]


class BrokenEngine(HFSampler):
    """A sampler whose engine dies on its second call (fault injection: the path under test is ours)."""

    calls = 0

    def generate(self, prompt_token_ids, n, sampling):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the engine died")
        return super().generate(prompt_token_ids, n, sampling)


def test_a_sampler_that_fails_fails_the_rollout_not_the_agents(model_dir, tokenizer):
    sampler = BrokenEngine(load_causal_lm(model_dir), tokenizer)
    with pytest.raises(RuntimeError, match="the engine died"):
        rollout(
            RolloutRequest("rlvr/Agent-v0", {"agent": plan_then_answer}, seeds=[1], group_size=1, sampling=SAMPLING),
            sampler,
            tokenizer,
        )
