"""ToolEnv: tools with JSON schemas, rendered by the tiny model's chat template (`tools=`),
called in the Hermes/Qwen `<tool_call>` format, validated, bounded, answered as `tool` messages;
a multi-turn rollout with the tiny model whose environment tokens are the template's exactly; the README's
tool example. rlvr/PythonTool-v0 in both call formats: tests/envs/tasks/test_python_tool.py."""

from __future__ import annotations

import itertools
import json
import pickle
import re
import time

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from rlvr import envs
from rlvr.envs.chat_template import _reply_ids_after_eos, _reply_ids_whole, reply_ids, template_ids
from rlvr.envs.core import ProceduralTasks, Task
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.sampler import SamplingSettings
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import (
    HermesParser,
    MarkdownPythonParser,
    Tool,
    ToolCall,
    ToolSpecError,
    ToolUnavailableError,
    argument_errors,
    get_parser,
    minimal_errors,
)
from rlvr.verifiers.verdict import Outcome, Verdict
from tests.conftest import require

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def add(a: int, b: int) -> str:
    return str(a + b)


def boom(x: str) -> str:
    raise ValueError(f"cannot take {x!r}")


def slow() -> str:
    time.sleep(5)
    return "late"


def down() -> str:
    raise ToolUnavailableError("the service is down")


def stats(values: list) -> dict:
    return {"n": len(values), "sum": sum(values)}


class CalcEnv(ProceduralTasks, ToolEnv):
    """What is a + b? Call add(a, b), then answer \\boxed{sum}. `extra` adds the tools that fail."""

    def __init__(self, extra: bool = False, max_turns: int = 3, tool_format: str = "hermes"):
        tools = [Tool("add", "Add two integers.", ADD_SCHEMA, add)]
        if extra:
            tools += [
                Tool("boom", "Always raises.", {"type": "object", "properties": {"x": {"type": "string"}}}, boom),
                Tool("slow", "Hangs.", {"type": "object", "properties": {}}, slow, timeout_s=0.3),
                Tool("down", "Its backend is down.", {"type": "object", "properties": {}}, down),
                Tool(
                    "stats",
                    "Count and sum.",
                    {
                        "type": "object",
                        "properties": {"values": {"type": "array", "items": {"type": "number"}}},
                        "required": ["values"],
                    },
                    stats,
                ),
            ]
        super().__init__(tools=tools, tool_format=tool_format, max_turns=max_turns, max_calls_per_turn=3)

    def make_task(self, seed: int) -> Task:
        a, b = 10 + seed * 37 % 90, 10 + seed * 53 % 90
        prompt = [{"role": "user", "content": f"What is {a} + {b}? Use the add tool, then answer as \\boxed{{N}}."}]
        return Task(str(seed), prompt, a + b, self.format_call("add", a=a, b=b), f"\\boxed{{{a + b + 1}}}")

    def reference_action(self) -> str:
        return self.task.reference if self.tool_calls == 0 else f"\\boxed{{{self.task.answer}}}"

    def final_answer(self, action: str) -> Verdict | None:
        m = re.search(r"\\boxed\{(-?\d+)\}", action)
        if m is None:
            return None
        ok = int(m.group(1)) == self.task.answer
        return Verdict(float(ok), Outcome.CORRECT if ok else Outcome.INCORRECT)


gym.register("rlvr-test/Calc-v0", entry_point=CalcEnv)


def call(name: str, **arguments) -> str:
    return HermesParser().format_call(ToolCall(name, arguments))


# ---- rendering ----------------------------------------------------------------------------------
def test_the_tiny_template_lists_tools_and_wraps_tool_messages(tokenizer):
    env = CalcEnv()
    messages, _ = env.reset(seed=3)
    tools = env.chat_tools
    assert tools == [
        {"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": ADD_SCHEMA}}
    ]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    head = "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    assert text.startswith(head)
    assert "<tools>\n" + json.dumps(tools[0]) + "\n</tools>" in text
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' in text
    assert text.endswith(f"<|im_start|>user\n{messages[0]['content']}<|im_end|>\n<|im_start|>assistant\n")
    # A system message goes first in the tools' system turn; tool messages in a row share one user turn.
    conversation = [
        {"role": "system", "content": "Be brief."},
        *messages,
        {"role": "assistant", "content": env.reference_action()},
        {"role": "tool", "content": "5"},
        {"role": "tool", "content": "6"},
    ]
    text = tokenizer.apply_chat_template(conversation, tools=tools, tokenize=False)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n") and text.count("<|im_start|>system") == 1
    assert text.endswith(
        "<|im_start|>user\n<tool_response>\n5\n</tool_response>\n<tool_response>\n6\n</tool_response><|im_end|>\n"
    )
    # A structured tool call (OpenAI's form, arguments as an object or a JSON string) renders as the
    # model writes one in its text.
    for arguments in ({"a": 1, "b": 2}, '{"a": 1, "b": 2}'):
        structured = [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": arguments}}],
            }
        ]
        assert tokenizer.apply_chat_template(structured, tools=tools, tokenize=False) == tokenizer.apply_chat_template(
            [{"role": "assistant", "content": call("add", a=1, b=2)}], tools=tools, tokenize=False
        )


def test_without_tools_the_template_is_plain_chatml(tokenizer):
    conversation = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "```python\nprint(1)\n```"},
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
        {"role": "assistant", "content": "\\boxed{1}"},
    ]
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert (
        text
        == "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        + "<|im_start|>assistant\n"
    )
    assert template_ids(tokenizer, conversation, True) == template_ids(tokenizer, conversation, True, tools=None)


@pytest.mark.parametrize("model_ended_turn", [True, False])
def test_reply_ids_with_tools_extend_the_template_exactly(tokenizer, model_ended_turn):
    """Both paths of `reply_ids` (text after eos, whole template) agree with tools, and the
    conversation's tokens grow by exactly the reply tokens."""
    env = CalcEnv(extra=True)
    messages, _ = env.reset(seed=1)
    tools = env.chat_tools
    conversation = list(messages)
    for text, reply in [
        (call("add", a=1, b=2), [{"role": "tool", "content": "3"}]),
        (
            call("add", a=1, b=2) + "\n" + call("stats", values=[1, 2]),
            [{"role": "tool", "content": "3"}, {"role": "tool", "content": '{"n": 2, "sum": 3}'}],
        ),
        ("<tool_call>{bad", [{"role": "tool", "content": "error: é 名字"}]),
    ]:
        conversation.append({"role": "assistant", "content": text})
        fast = _reply_ids_after_eos(tokenizer, conversation, reply, model_ended_turn, tools)
        assert fast == _reply_ids_whole(tokenizer, conversation, reply, model_ended_turn, tools)
        assert fast == reply_ids(tokenizer, conversation, reply, model_ended_turn, tools)
        before = template_ids(tokenizer, conversation, False, tools)
        after = template_ids(tokenizer, conversation + reply, True, tools)
        if model_ended_turn:
            assert before + fast[1:] == after  # fast[0] is the newline after eos
        conversation += reply


# ---- parsing and validation -----------------------------------------------------------------------
def test_hermes_parser_reads_good_calls_and_explains_bad_ones():
    p = get_parser("hermes")
    (one,) = p.parse("Let me add.\n" + call("add", a=2, b=3))
    assert one.call == ToolCall("add", {"a": 2, "b": 3}) and one.error is None
    two = p.parse(
        call("add", a=1, b=2) + "and" + '<tool_call>{"name": "stats", "arguments": "{\\"values\\": [1]}"}</tool_call>'
    )
    assert [c.call for c in two] == [ToolCall("add", {"a": 1, "b": 2}), ToolCall("stats", {"values": [1]})]
    assert p.parse("no call here, \\boxed{5}") == []
    bad = {
        "<tool_call>{'name': 'add'}</tool_call>": "not valid JSON",
        "<tool_call>[1, 2]</tool_call>": "JSON object",
        '<tool_call>{"arguments": {}}</tool_call>': "JSON object",
        '<tool_call>{"name": "add", "arguments": [1]}</tool_call>': "arguments must be a JSON object",
        '<tool_call>{"name": "add", "arguments": "{oops"}</tool_call>': "arguments string",
        '<tool_call>{"name": "add", "arguments": {"a": 1}}': "not closed",
        "<tool_call>" + "[" * 100_000 + "</tool_call>": "not valid JSON",
    }
    for text, why in bad.items():
        (attempt,) = p.parse(text)
        assert attempt.call is None and why in attempt.error, (text[:40], attempt.error)
    assert json.loads(call("add", a=1, b=2).removeprefix("<tool_call>\n").removesuffix("\n</tool_call>")) == {
        "name": "add",
        "arguments": {"a": 1, "b": 2},
    }


def test_markdown_parser_is_the_python_block_syntax():
    p = MarkdownPythonParser()
    (attempt,) = p.parse("Compute:\n```python\nprint(1)\n```\n")
    assert attempt.call == ToolCall("python", {"code": "print(1)\n"}) and not p.renders_tools
    assert (
        p.parse("no code") == [] and p.format_call(ToolCall("python", {"code": "x = 1\n"})) == "```python\nx = 1\n```"
    )
    with pytest.raises(ToolSpecError):
        p.format_call(ToolCall("add", {"a": 1}))
    with pytest.raises(ValueError, match="tool_format"):
        get_parser("xml")


@pytest.mark.parametrize("check", [argument_errors, minimal_errors], ids=["jsonschema", "minimal"])
def test_arguments_are_checked_against_the_schema(check):
    schema = {
        "type": "object",
        "required": ["a", "b"],
        "additionalProperties": False,
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "mode": {"type": "string", "enum": ["fast", "exact"]},
            "xs": {"type": "array", "items": {"type": "number"}},
        },
    }
    assert (
        check(schema, {"a": 1, "b": -2}) == [] and check(schema, {"a": 1, "b": 2, "xs": [1, 2.5], "mode": "fast"}) == []
    )
    assert any("'b'" in e and "required" in e for e in check(schema, {"a": 1}))
    assert any("not of type" in e for e in check(schema, {"a": "1", "b": 2}))
    assert any("not of type" in e for e in check(schema, {"a": True, "b": 2}))  # a bool is no integer
    assert any("not of type" in e for e in check(schema, {"a": 1, "b": 2, "xs": [1, "2"]}))
    assert any("not one of" in e for e in check(schema, {"a": 1, "b": 2, "mode": "slow"}))
    assert any("'c'" in e for e in check(schema, {"a": 1, "b": 2, "c": 0}))


def test_bad_tool_definitions_are_typed_errors():
    for kwargs, message in [
        ({"name": "two words"}, "name"),
        ({"parameters": {"type": "string"}}, "object"),
        ({"fn": 3}, "callable"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"parameters": {"type": "object", "properties": 5}}, "valid JSON schema"),
    ]:
        with pytest.raises(ToolSpecError, match=message):
            Tool(**{"name": "add", "description": "", "parameters": ADD_SCHEMA, "fn": add, **kwargs})
    with pytest.raises(ValueError, match="distinct"):
        ToolEnv([Tool("add", "", ADD_SCHEMA, add)] * 2)


# ---- one env, turn by turn --------------------------------------------------------------------------
def test_a_call_then_the_answer():
    env = CalcEnv()
    env.reset(seed=4)
    reply, reward, terminated, truncated, info = env.step(env.reference_action())
    assert reply == [{"role": "tool", "content": str(env.task.answer)}] and (reward, terminated, truncated) == (
        0,
        False,
        False,
    )
    assert info["verdict"].outcome is Outcome.INCORRECT and info["verdict"].info["calls"] == [
        {"name": "add", "status": "ok"}
    ]
    reply, reward, terminated, _, info = env.step(env.reference_action())
    assert (reply, reward, terminated, info["verdict"].outcome) == ([], 1.0, True, Outcome.CORRECT)


def test_malformed_calls_are_format_errors_told_to_the_model():
    env = CalcEnv(extra=True, max_turns=8)
    env.reset(seed=0)
    cases = [
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        (call("mul", a=1, b=2), "unknown tool 'mul'; the tools are add, boom, slow, down, stats"),
        (call("add", a=1), "'b' is a required property"),
        (call("add", a="1", b=2), "is not of type 'integer'"),
        (call("boom", x="y"), "error: ValueError: cannot take 'y'"),
    ]
    for text, message in cases:
        reply, reward, terminated, truncated, info = env.step(text)
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["verdict"].outcome is Outcome.FORMAT_ERROR and len(reply) == 1
        assert reply[0]["role"] == "tool" and message in reply[0]["content"], reply
    # Several calls: each answered in order; a bad one makes the turn a format error.
    env.reset(seed=0)
    reply, _, _, _, info = env.step(call("add", a=1, b=2) + call("add", a=1) + call("stats", values=[1, 2.5]))
    assert [m["content"] for m in reply][0::2] == ["3", '{"n": 2, "sum": 3.5}'] and "required" in reply[1]["content"]
    assert info["verdict"].outcome is Outcome.FORMAT_ERROR and info["verdict"].detail.startswith("call 2:")
    reply, *_ = env.step(call("add", a=1, b=1) * 4)  # max_calls_per_turn=3
    assert [m["content"] for m in reply] == ["2"] * 3 + ["error: at most 3 tool calls per reply; not run"]
    # Neither a call nor an answer ends the episode.
    _, _, terminated, _, info = env.step("I do not know.")
    assert terminated and info["verdict"].outcome is Outcome.FORMAT_ERROR


def test_a_hanging_tool_is_bounded_and_a_down_one_is_the_graders_error():
    env = CalcEnv(extra=True)
    env.reset(seed=0)
    start = time.monotonic()
    reply, _, terminated, _, info = env.step(call("slow"))
    assert time.monotonic() - start < 2.0 and not terminated
    assert reply[0]["content"] == "error: the tool 'slow' did not return within 0.3s"
    assert info["verdict"].info["calls"] == [{"name": "slow", "status": "timeout"}]
    _, _, terminated, _, info = env.step(call("down"))
    assert terminated and info["verdict"].outcome is Outcome.ERROR and "the service is down" in info["verdict"].detail


def test_checkers_pass():
    env = CalcEnv(extra=True)
    envs.check_env(env, seeds=(0, 1))
    gym_check_env(CalcEnv(), skip_render_check=True)
    clone = pickle.loads(pickle.dumps(env))
    clone.reset(seed=2)
    assert clone.step(clone.reference_action())[0] == [{"role": "tool", "content": str(clone.task.answer)}]


# ---- a rollout with the tiny model --------------------------------------------------------------------
@pytest.fixture(scope="module")
def tool_model(tokenizer):
    """The tiny model after a short warm start on CalcEnv conversations in the Hermes format
    (a copy, in memory): it then writes `<tool_call>` calls, so that episodes have tool turns.
    The conversations share their first 340 tokens (the template's tools system turn, no loss there):
    each step runs that prefix once, without gradient, and trains the 8 conversations' ~116-token
    rest on its key/value cache (about a fifth of the whole conversations' cost; it fits as well)."""
    import torch

    from rlvr.trainers.models import load_causal_lm
    from rlvr.trainers.tiny.corpus import sft_conversation
    from rlvr.trainers.tiny.model import collate

    env = CalcEnv()
    examples = []
    for seed in range(2000, 2064):  # not the rollout's tasks
        env.reset(seed=seed)
        conversation = [
            *env.task.prompt,
            {"role": "assistant", "content": env.task.reference},
            {"role": "tool", "content": str(env.task.answer)},
            {"role": "assistant", "content": f"\\boxed{{{env.task.answer}}}"},
        ]
        examples.append(sft_conversation(tokenizer, conversation, tools=env.chat_tools))
    shared = next(n for n, column in enumerate(zip(*(ids for ids, _ in examples))) if len(set(column)) > 1)
    assert all(label == -100 for _, labels in examples for label in labels[:shared])
    prefix_1P = torch.tensor([examples[0][0][:shared]])
    rests = [(ids[shared:], labels[shared:]) for ids, labels in examples]
    torch.manual_seed(0)
    model = load_causal_lm("tiny").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for step in range(40):
        with torch.no_grad():  # the prefix under this step's weights
            cache = model(input_ids=prefix_1P, use_cache=True).past_key_values
        cache.batch_repeat_interleave(8)
        batch = collate([rests[(step * 8 + i) % len(rests)] for i in range(8)], tokenizer.pad_token_id)
        mask_BT = torch.cat([torch.ones(8, shared, dtype=torch.long), batch["attention_mask"]], dim=1)
        model(**{**batch, "attention_mask": mask_BT}, past_key_values=cache).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


def check_tool_episodes(groups, calls, tokenizer) -> None:
    """Token exactness (`tests.envs.test_rollout.assert_token_exact`), the prompt lists the tools, and each run
    of environment tokens is the template's rendering (with tools) of the reply after a model turn;
    some turns called a tool that ran."""
    from tests.envs.test_rollout import assert_token_exact, mask_runs

    tools = CalcEnv().chat_tools
    tool_turns = ran = 0
    for g in groups:
        for ep in g.episodes:
            assert_token_exact(ep, calls, tokenizer)
            assert ep.prompt_ids == template_ids(tokenizer, ep.messages[:1], True, tools)
            model_turns = [i for i, m in enumerate(ep.messages) if m["role"] == "assistant"]
            env_runs = [(start, end) for start, end, mask in mask_runs(ep) if mask == 0]
            for (start, end), i in zip(env_runs, model_turns):
                reply = list(itertools.takewhile(lambda m: m["role"] != "assistant", ep.messages[i + 1 :]))
                ended = ep.completion_ids[start - 1] == tokenizer.eos_token_id
                assert ep.completion_ids[start:end] == reply_ids(tokenizer, ep.messages[: i + 1], reply, ended, tools)
                assert all(m["role"] == "tool" for m in reply)
                tool_turns += 1
                ran += sum(not m["content"].startswith("error:") for m in reply)
            assert len(env_runs) == ep.metadata["turns"] - 1
            assert ep.outcome in (Outcome.CORRECT, Outcome.INCORRECT, Outcome.FORMAT_ERROR, Outcome.TRUNCATED)
    assert tool_turns > 0 and ran > 0, "no episode called a tool that ran: the tool path was not exercised"
    print(
        f"\n{tool_turns} tool turns, {ran} calls run; outcomes:",
        sorted(str(ep.outcome) for g in groups for ep in g.episodes),
    )


def test_a_rollout_with_tool_calls_is_token_exact(tool_model, tokenizer):
    from rlvr.trainers.samplers import HFSampler
    from tests.envs.test_rollout import RecordingSampler

    sampler = RecordingSampler(HFSampler(tool_model, tokenizer))
    groups = rollout(
        RolloutRequest(
            "rlvr-test/Calc-v0",
            {"max_turns": 3},
            seeds=[1, 2, 3],
            group_size=4,
            sampling=SamplingSettings(temperature=1.0, max_tokens=64, seed=0),
        ),
        sampler,
        tokenizer,
        progress=False,
    )
    check_tool_episodes(groups, sampler.calls, tokenizer)


@pytest.mark.vllm
def test_a_vllm_rollout_with_tool_calls_is_token_exact(tool_model, tokenizer, model_dir, tmp_path, request):
    """The same through vLLM, each episode on its own (the schedule training uses)."""
    import importlib.util
    import shutil

    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    from rlvr.trainers.samplers import VLLMSampler
    from tests.envs.test_rollout_per_episode import RecordingRequests

    tool_model.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        shutil.copy(model_dir / name, tmp_path)
    engine = VLLMSampler(str(tmp_path), max_model_len=1024)
    request.addfinalizer(engine.close)
    sampler = RecordingRequests(engine)
    groups = rollout(
        RolloutRequest(
            "rlvr-test/Calc-v0",
            {"max_turns": 3},
            seeds=[1, 2, 3, 4],
            group_size=4,
            sampling=SamplingSettings(temperature=1.0, max_tokens=64, seed=0),
        ),
        sampler,
        tokenizer,
        progress=False,
    )
    check_tool_episodes(groups, sampler.calls, tokenizer)


def test_the_readme_tool_example_runs(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = re.split(r"\n#{2,3} ", text.split("### Tool environments", 1)[1], maxsplit=1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (tmp_path / "multiply.py").write_text(code, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "multiply.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("multiply [{'role': 'tool', 'content': '") and "python multiply.py" in section
