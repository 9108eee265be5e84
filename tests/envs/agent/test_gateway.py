"""The agent gateway (`envs.agent.gateway`): real HTTP, the real `openai` client, the tiny model."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import openai
import pytest

from rlvr.envs.agent.calls import ENV_VERSION, segments
from rlvr.envs.agent.gateway import AgentGateway, GatewayError
from rlvr.envs.chat_template import template_ids
from rlvr.envs.core import MultiTurnEnv, ProceduralTasks, TurnResult
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.rollout.sampler_calls import TURN_SEED_STRIDE
from rlvr.envs.sampler import SamplingSettings
from rlvr.envs.tasks.arithmetic import ArithmeticEnv
from rlvr.trainers.models import load_causal_lm
from rlvr.trainers.samplers import HFCopySampler, HFSampler
from rlvr.verifiers.verdict import Outcome, Verdict

FOLLOW_UP = {"role": "user", "content": "Now give only the final answer, in \\boxed{}."}
SEED, MAX_TOKENS = 7, 12


class PlanThenAnswerEnv(ProceduralTasks, MultiTurnEnv):
    """The hand-built episode of the same agent: Arithmetic's task; turn 1 (the plan) is answered by
    the follow-up message, turn 2 is verified."""

    def __init__(self):
        super().__init__(max_turns=2)
        self.arithmetic = ArithmeticEnv()

    def make_task(self, seed: int):
        return self.arithmetic.make_task(seed)

    def respond(self, action: str) -> TurnResult:
        if self.turns == 1:
            return TurnResult([dict(FOLLOW_UP)], 0.0, False, Verdict(0.0, Outcome.INCORRECT, "plan"))
        verdict = self.arithmetic.verify(self.task, action)
        return TurnResult([], verdict.score, True, verdict)


gym.register("rlvr-test/PlanThenAnswer-v0", entry_point=PlanThenAnswerEnv)


@pytest.fixture(scope="module")
def hf_sampler(model_dir, tokenizer):
    return HFSampler(load_causal_lm(model_dir), tokenizer)


@pytest.fixture(scope="module")
def gateway(hf_sampler, tokenizer):
    with AgentGateway(hf_sampler, tokenizer) as g:
        yield g


async def plan_then_answer(client: openai.AsyncOpenAI, messages: list[dict]) -> str:
    """A two-call agent, written with the plain client, seeded as the rollout seeds its turns."""
    plan = await client.chat.completions.create(
        model="rlvr-policy", messages=messages, max_tokens=MAX_TOKENS, temperature=1.0, seed=SEED
    )
    messages = messages + [{"role": "assistant", "content": plan.choices[0].message.content}, FOLLOW_UP]
    answer = await client.chat.completions.create(
        model="rlvr-policy", messages=messages, max_tokens=MAX_TOKENS, temperature=1.0, seed=SEED + TURN_SEED_STRIDE
    )
    return answer.choices[0].message.content


def run_agent(gateway, agent, *args):
    episode = gateway.open_episode()
    client = openai.AsyncOpenAI(base_url=gateway.base_url(episode), api_key="unused", max_retries=0)

    async def go():
        async with client:
            return await agent(client, *args)

    return episode, asyncio.run(go())


def test_a_two_call_agent_is_token_exact_and_equals_the_hand_built_episode(gateway, hf_sampler, tokenizer):
    task_id = "3"
    messages = ArithmeticEnv().make_task(int(task_id)).prompt
    episode, answer = run_agent(gateway, plan_then_answer, messages)
    calls = gateway.close_episode(episode)
    assert len(calls) == 2 and calls[1].text == answer
    # each call token-exact: the prompt the template gives, the engine's ids, the text they decode to
    assert list(calls[0].prompt_ids) == template_ids(tokenizer, messages, True)
    for c in calls:
        assert c.text == tokenizer.decode(list(c.completion_ids), skip_special_tokens=True)
        assert len(c.logprobs) == len(c.completion_ids) > 0 and all(lp <= 0 for lp in c.logprobs)
    # one segment, equal to the episode the rollout builds for the same conversation, same seeds
    (seg,) = segments(calls)
    (group,) = rollout(
        RolloutRequest(
            "rlvr-test/PlanThenAnswer-v0",
            {},
            seeds=(),
            task_ids=[task_id],
            group_size=1,
            sampling=SamplingSettings(temperature=1.0, max_tokens=MAX_TOKENS, seed=SEED),
        ),
        hf_sampler,
        tokenizer,
        progress=False,
    )
    (ep,) = group.episodes
    assert ep.metadata["turns"] == 2
    assert list(seg.prompt_ids) == ep.prompt_ids
    assert list(seg.completion_ids) == ep.completion_ids
    assert list(seg.loss_mask) == ep.loss_mask
    assert list(seg.logprobs) == pytest.approx(ep.logprobs, abs=1e-6)
    assert ep.messages[-1]["content"] == answer


async def rewrite_history(client: openai.AsyncOpenAI, messages: list[dict]) -> None:
    """An agent that asks twice, the second time with its history rewritten (no first answer)."""
    await client.chat.completions.create(model="m", messages=messages, max_tokens=4, seed=1)
    await client.chat.completions.create(model="m", messages=[FOLLOW_UP] + messages, max_tokens=4, seed=2)


def test_a_rewritten_history_starts_a_new_segment(gateway):
    messages = ArithmeticEnv().make_task(5).prompt
    episode, _ = run_agent(gateway, rewrite_history, messages)
    first, second = segments(gateway.close_episode(episode))
    assert first.calls == (0,) and second.calls == (1,)
    assert set(first.loss_mask) == set(second.loss_mask) == {1}


async def settings_and_completions(client: openai.AsyncOpenAI, messages: list[dict]):
    chat = await client.chat.completions.create(model="m", messages=messages, n=3, max_tokens=5, temperature=0.0)
    text = await client.completions.create(model="m", prompt="1 + 1 =", max_tokens=3, temperature=0.0)
    return chat, text


def test_n_max_tokens_greedy_and_the_completions_route(gateway, tokenizer):
    messages = ArithmeticEnv().make_task(1).prompt
    episode, (chat, text) = run_agent(gateway, settings_and_completions, messages)
    calls = gateway.close_episode(episode)
    assert len(chat.choices) == 3 and len(calls) == 4
    assert len({c.message.content for c in chat.choices}) == 1  # greedy: three equal choices
    assert all(len(c.completion_ids) <= 5 for c in calls[:3])
    assert chat.usage.prompt_tokens == len(calls[0].prompt_ids)
    assert list(calls[3].prompt_ids) == tokenizer.encode("1 + 1 =", add_special_tokens=False)
    assert text.choices[0].text == calls[3].text and len(calls[3].completion_ids) <= 3


async def streams(client: openai.AsyncOpenAI, messages: list[dict]):
    chat = await client.chat.completions.create(
        model="m", messages=messages, n=2, max_tokens=5, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in chat]
    text = await client.completions.create(model="m", prompt="1 + 1 =", max_tokens=3, stream=True)
    return chunks, [c async for c in text]


def test_a_streamed_answer_is_the_recorded_text(gateway):
    episode, (chat, text) = run_agent(gateway, streams, ArithmeticEnv().make_task(4).prompt)
    calls = gateway.close_episode(episode)
    for i in (0, 1):
        deltas = [ch.delta for c in chat for ch in c.choices if ch.index == i]
        assert "".join(d.content or "" for d in deltas) == calls[i].text
        assert [ch.finish_reason for c in chat for ch in c.choices if ch.index == i][-1] == str(calls[i].finish_reason)
    assert chat[-1].usage.completion_tokens == len(calls[0].completion_ids) + len(calls[1].completion_ids)
    assert "".join(ch.text for c in text for ch in c.choices) == calls[2].text


PYTHON_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "python",
            "description": "Run Python code and see what it prints.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]


async def calls_the_tool(client: openai.AsyncOpenAI, messages: list[dict], seed: int):
    """A tool-using agent: the model's call, the tool's answer, the model's next turn."""
    first = await client.chat.completions.create(
        model="m", messages=messages, tools=PYTHON_TOOL, max_tokens=60, seed=seed
    )
    said = first.choices[0].message
    answers = [{"role": "tool", "tool_call_id": c.id, "content": "42"} for c in said.tool_calls or []]
    history = [*messages, said.model_dump(exclude_none=True), *answers]
    second = await client.chat.completions.create(model="m", messages=history, tools=PYTHON_TOOL, max_tokens=8)
    return first, second


def test_tool_calls_are_sent_as_tool_calls_and_answering_them_continues_the_episode(hf_sampler, tokenizer):
    """The tiny model writes its python tool calls as markdown blocks (`tool_format="markdown"`): the
    agent gets them as `tool_calls`, sends them back with the tool's answers, and the next call
    extends the episode's token ids (one segment), as a turn-based tool rollout would."""
    messages, _ = gym.make("rlvr/PythonTool-v0").reset(seed=1)
    with AgentGateway(hf_sampler, tokenizer, tool_format="markdown") as g:
        for seed in range(16):  # a sample that makes a readable call (16 of 16 measured)
            episode, (first, second) = run_agent(g, calls_the_tool, messages, seed)
            calls = g.close_episode(episode)
            if first.choices[0].message.tool_calls:
                break
    (call,) = first.choices[0].message.tool_calls
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "python"
    assert json.loads(call.function.arguments)["code"] and calls[0].tool_calls[0]["id"] == call.id
    (segment,) = segments(calls)  # the tool's answer extended the model's turn: one segment
    assert segment.calls == (0, 1) and 0 in segment.loss_mask
    assert list(calls[1].prompt_ids[: len(calls[0].prompt_ids) + len(calls[0].completion_ids)]) == [
        *calls[0].prompt_ids,
        *calls[0].completion_ids,
    ]


def test_episodes_are_apart_and_bad_requests_are_one_clear_error(gateway):
    a, b = gateway.open_episode(), gateway.open_episode()
    assert gateway.base_url(a) != gateway.base_url(b)
    messages = ArithmeticEnv().make_task(2).prompt
    client = openai.OpenAI(base_url=gateway.base_url(a), api_key="unused", max_retries=0)
    client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert len(gateway.calls(a)) == 1 and gateway.calls(b) == []
    with pytest.raises(openai.BadRequestError, match="n must be"):
        client.chat.completions.create(model="m", messages=messages, n=0)
    with pytest.raises(openai.BadRequestError, match="exceeds the model's context"):
        client.chat.completions.create(model="m", messages=messages, max_tokens=10**6)
    gateway.close_episode(a)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    with pytest.raises(GatewayError):
        gateway.calls(a)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluates an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


async def with_tools(client: openai.AsyncOpenAI, messages: list[dict]) -> None:
    first = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS, max_tokens=4, seed=3)
    messages = messages + [{"role": "assistant", "content": first.choices[0].message.content}, FOLLOW_UP]
    await client.chat.completions.create(model="m", messages=messages, tools=TOOLS, max_tokens=4, seed=4)


def test_concurrent_episodes_never_mix_and_tools_reach_the_template(gateway, tokenizer):
    tasks = [ArithmeticEnv().make_task(s).prompt for s in (11, 12, 13)]
    episodes = [gateway.open_episode() for _ in tasks]

    async def all_at_once():
        clients = [openai.AsyncOpenAI(base_url=gateway.base_url(e), api_key="unused", max_retries=0) for e in episodes]
        await asyncio.gather(*(with_tools(c, m) for c, m in zip(clients, tasks)))
        for c in clients:
            await c.close()

    asyncio.run(all_at_once())
    for episode, messages in zip(episodes, tasks):
        calls = gateway.close_episode(episode)
        assert len(calls) == 2 and all(list(c.tools) == TOOLS for c in calls)
        assert list(calls[0].prompt_ids) == template_ids(tokenizer, messages, True, TOOLS)
        assert len(segments(calls)) == 1  # its own two calls, one conversation


def test_each_call_records_the_policy_version_that_answered(model_dir, tokenizer):
    sampler = HFCopySampler(load_causal_lm(model_dir), tokenizer, version=3)
    with AgentGateway(sampler, tokenizer) as g:
        episode = g.open_episode()
        client = openai.OpenAI(base_url=g.base_url(episode), api_key="unused", max_retries=0)
        messages = ArithmeticEnv().make_task(4).prompt
        first = client.chat.completions.create(model="m", messages=messages, max_tokens=3)
        sampler.update_weights((), version=4)  # the trainer's next version (no tensors: the same weights)
        messages = messages + [{"role": "assistant", "content": first.choices[0].message.content}, FOLLOW_UP]
        client.chat.completions.create(model="m", messages=messages, max_tokens=3)
        calls = g.close_episode(episode)
    assert [c.version for c in calls] == [3, 4]
    (seg,) = segments(calls)
    n0, n1 = len(calls[0].completion_ids), len(calls[1].completion_ids)
    gap = len(seg.completion_ids) - n0 - n1
    assert seg.versions == (3,) * n0 + (ENV_VERSION,) * gap + (4,) * n1


@pytest.mark.parametrize("missing", ["fastapi", "uvicorn", "openai"])
def test_without_the_agent_extra_the_gateway_says_what_to_install(monkeypatch, missing):
    from rlvr.envs.agent import gateway

    monkeypatch.setitem(__import__("sys").modules, missing, None)  # what an import of an absent package meets
    with pytest.raises(
        GatewayError, match=rf"needs the `agent` extra \({missing} is missing\): pip install 'rlvr\[agent\]'"
    ):
        gateway._web()
