"""Agent episodes (`envs.agent.play`): the user's agent through the gateway, judged, timed out, turned into episodes."""

from __future__ import annotations

import asyncio
import time

import pytest

from rlvr.envs.agent.calls import segments
from rlvr.envs.agent.gateway import AgentGateway
from rlvr.envs.agent.play import AgentResult, agent_episodes, agent_rollout, judge, play_agent
from rlvr.envs.tasks.arithmetic import ArithmeticEnv
from rlvr.trainers.models import load_causal_lm
from rlvr.trainers.samplers import HFSampler
from rlvr.verifiers.verdict import Outcome, Verdict

TASK = ArithmeticEnv().make_task(3)
FOLLOW_UP = {"role": "user", "content": "Now give only the final answer, in \\boxed{}."}


@pytest.fixture(scope="module")
def gateway(model_dir, tokenizer):
    with AgentGateway(HFSampler(load_causal_lm(model_dir), tokenizer), tokenizer) as g:
        yield g


async def plan_then_answer(client, task):
    """Two calls with the plain client; the reward from rlvr's own verifier."""
    messages = list(task.prompt)
    plan = await client.chat.completions.create(model="policy", messages=messages, max_tokens=8, seed=0)
    messages += [{"role": "assistant", "content": plan.choices[0].message.content}, FOLLOW_UP]
    answer = await client.chat.completions.create(model="policy", messages=messages, max_tokens=8, seed=1)
    return ArithmeticEnv().verify(task, answer.choices[0].message.content)


def test_an_agent_episode_is_its_calls_with_its_verdict(gateway):
    result = play_agent(gateway, plan_then_answer, TASK, timeout_s=120)
    assert len(result.calls) == 2 and result.verdict.outcome in (Outcome.INCORRECT, Outcome.CORRECT)
    (ep,) = agent_episodes(result, env_id="agent", task_id=TASK.task_id, group_id=0, messages=TASK.prompt)
    (seg,) = segments(result.calls)
    assert (ep.prompt_ids, ep.completion_ids, ep.loss_mask) == (
        list(seg.prompt_ids),
        list(seg.completion_ids),
        list(seg.loss_mask),
    )
    assert ep.reward == result.verdict.score and ep.outcome is result.verdict.outcome
    assert ep.metadata["segment"] == 0 and ep.metadata["calls"] == [0, 1]


async def rewrites(client, task):
    await client.chat.completions.create(model="p", messages=list(task.prompt), max_tokens=3)
    await client.chat.completions.create(model="p", messages=[FOLLOW_UP, *task.prompt], max_tokens=3)
    return 0.25


def test_every_segment_gets_the_episodes_reward(gateway):
    result = play_agent(gateway, rewrites, TASK, timeout_s=120)
    eps = agent_episodes(result, env_id="agent", task_id=TASK.task_id, group_id=4, messages=TASK.prompt)
    assert [e.metadata["segment"] for e in eps] == [0, 1]
    assert [e.reward for e in eps] == [0.25, 0.25] and {e.outcome for e in eps} == {Outcome.INCORRECT}
    assert {e.group_id for e in eps} == {4}


async def raises(client, task):
    await client.chat.completions.create(model="p", messages=list(task.prompt), max_tokens=2)
    raise KeyError("the harness broke")


async def hangs(client, task):
    await asyncio.sleep(60)


async def blocks(client, task):
    time.sleep(3)  # a synchronous call inside the agent: the loop cannot cancel it


async def out_of_range(client, task):
    await client.chat.completions.create(model="p", messages=list(task.prompt), max_tokens=2)
    return 2.0


@pytest.mark.parametrize(
    ("agent", "timeout_s", "detail"),
    [
        (raises, 60, "raised KeyError"),
        (hangs, 0.5, "did not finish in 0.5 s"),
        (blocks, 0.5, "did not finish in 0.5 s"),
        (out_of_range, 60, "returned 2.0"),
    ],
)
def test_a_failing_or_hung_agent_is_an_error_never_a_zero(gateway, agent, timeout_s, detail):
    t0 = time.perf_counter()
    result = play_agent(gateway, agent, TASK, timeout_s=timeout_s)
    assert time.perf_counter() - t0 < timeout_s + 2
    assert result.verdict.outcome is Outcome.ERROR and detail in result.verdict.detail
    (ep, *_) = agent_episodes(result, env_id="agent", task_id=TASK.task_id, group_id=0, messages=TASK.prompt)
    assert ep.is_error


def test_judging_what_the_agent_returned():
    assert judge(1.0) == Verdict(1.0, Outcome.CORRECT, "the agent's reward")
    assert judge(0).outcome is Outcome.INCORRECT
    verdict = Verdict(0.5, Outcome.FORMAT_ERROR, "no box")
    assert judge(verdict) is verdict
    for bad in (None, True, -0.1, "1.0"):
        assert judge(bad).outcome is Outcome.ERROR
    (ep,) = agent_episodes(
        AgentResult((), Verdict(1.0, Outcome.CORRECT)), env_id="a", task_id="1", group_id=0, messages=[]
    )
    assert ep.is_error and ep.metadata["detail"] == "the agent made no call"


def test_agent_rollout_plays_groups_at_once(gateway):
    tasks = [ArithmeticEnv().make_task(s) for s in (21, 22)]
    groups = agent_rollout(gateway, rewrites, tasks, group_size=2, group_id_start=10)
    assert [(g.task_id, g.group_id) for g in groups] == [("21", 10), ("22", 11)]
    for g, task in zip(groups, tasks):
        assert len(g.episodes) == 4  # 2 episodes x 2 segments (each rewrote its history once)
        assert {e.reward for e in g.episodes} == {0.25} and g.num_errors == 0
        assert all(e.task_id == task.task_id and e.group_id == g.group_id for e in g.episodes)
