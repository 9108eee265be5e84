"""rlvr/PythonTool-v0: tool calls run in the real sandbox, output returned (capped), final answer
checked by verifiers.math; the markdown and the Hermes call formats (the tool's schema in the chat template)."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from rlvr import envs
from rlvr.envs.chat_template import template_ids
from rlvr.envs.tasks.python_tool import TEMPLATES, PythonToolEnv, _collatz_steps, _fib_mod, _primes, format_tool_output
from rlvr.envs.tools import HermesParser, ToolCall
from rlvr.sandbox.types import Limits, Status
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require


def test_answer_helpers_worked_numbers():
    assert sum(_primes(100)) == 24133
    assert _fib_mod(100, 1000) == 75  # F(100) = 354224848179261915075
    assert _fib_mod(1, 7) == 1 and _fib_mod(2, 7) == 1 and _fib_mod(10, 1000) == 55
    assert _collatz_steps(27) == 111 and _collatz_steps(1) == 0
    assert sum(int(d) for d in str(math.factorial(100))) == 648


def test_every_templates_tool_code_prints_its_answer(box):
    jobs = []
    for name in TEMPLATES:
        env = PythonToolEnv(templates=(name,))
        jobs += [env.make_task(seed) for seed in (0, 1)]
    assert {t.metadata["template"] for t in jobs} == set(TEMPLATES)

    def run(task):
        code = task.reference.removeprefix("```python\n").removesuffix("\n```")
        return box.run(files={"tool.py": code}, command=["python3", "tool.py"], limits=Limits(timeout_s=20))

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, jobs))
    for task, result in zip(jobs, results):
        assert result.ok and result.stdout.strip() == task.answer, (task.metadata, result)


def test_tool_call_then_answer(box):
    env = PythonToolEnv(sandbox=box)
    obs, info = env.reset(seed=5)
    assert "```python" in obs[0]["content"] and "\\boxed{answer}" in obs[0]["content"]
    reply, reward, terminated, truncated, info = env.step(env.reference_action())
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert reply == [{"role": "tool", "content": env.task.answer}]
    assert info["verdict"].info["tool_status"] == "ok"
    reply, reward, terminated, truncated, info = env.step(env.reference_action())
    assert (reply, reward, terminated, truncated) == ([], 1.0, True, False)
    assert info["verdict"].outcome is Outcome.CORRECT


def test_wrong_answer_format_error_and_truncation(box):
    env = PythonToolEnv(max_turns=2, sandbox=box)
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step(env.wrong_action())
    assert (reward, terminated, info["verdict"].outcome) == (0.0, True, Outcome.INCORRECT)
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step("I think it is large.")
    assert (reward, terminated, info["verdict"].outcome) == (0.0, True, Outcome.FORMAT_ERROR)
    env.reset(seed=1)
    env.step("```python\nprint(1)\n```")
    reply, reward, terminated, truncated, info = env.step("```python\nprint(2)\n```")
    assert (reply, reward, terminated, truncated) == ([], 0.0, False, True)
    assert info["verdict"].outcome is Outcome.TRUNCATED


def test_tool_errors_timeouts_and_huge_output_come_back_capped(box):
    env = PythonToolEnv(tool_timeout_s=1.0, max_output_chars=200, tool_role="user", sandbox=box)
    env.reset(seed=2)
    reply, *_ = env.step("```python\nprint('before')\n1 / 0\n```")
    assert reply[0]["role"] == "user"
    assert reply[0]["content"].startswith("before\nTraceback") and "ZeroDivisionError" in reply[0]["content"]
    assert reply[0]["content"].endswith("[exit code 1]")
    env.reset(seed=2)
    reply, *_ = env.step("```python\nwhile True:\n    pass\n```")
    assert reply[0]["content"].endswith("[stopped: time limit of 1s exceeded]")
    env.reset(seed=2)
    reply, _, terminated, _, _ = env.step("```python\nprint('x' * 100000)\n```")
    assert not terminated and len(reply[0]["content"]) < 300 and "[... output truncated ...]" in reply[0]["content"]
    assert format_tool_output("", "", Status.OK, 0, 1.0, 200) == "[no output: use print() to see values]"


def test_check_env_passes(box):
    check_env = getattr(envs, "check_env", None)
    require(check_env is not None, "rlvr.envs.check_env is not available yet")
    check_env(envs.make("rlvr/PythonTool-v0"), seeds=(0, 1))


def test_bad_arguments():
    for kwargs, message in [
        ({"max_turns": 1}, "max_turns"),
        ({"tool_role": "system"}, "tool_role"),
        ({"templates": ("nope",)}, "templates"),
        ({"tool_timeout_s": 0}, "tool_timeout_s"),
    ]:
        with pytest.raises(ValueError, match=message):
            PythonToolEnv(**kwargs)


# ---- in both call formats (hermes: the tool as a JSON schema in the chat template) -------------------
def call(name: str, **arguments) -> str:
    return HermesParser().format_call(ToolCall(name, arguments))


@pytest.mark.docker
def test_python_tool_in_the_hermes_format(box, tokenizer):
    env = PythonToolEnv(sandbox=box, tool_format="hermes")
    messages, _ = env.reset(seed=5)
    assert "```python" not in messages[0]["content"] and env.chat_tools[0]["function"]["name"] == "python"
    assert "<tools>" in tokenizer.decode(template_ids(tokenizer, messages, True, env.chat_tools))
    action = env.reference_action()
    assert action.startswith('<tool_call>\n{"name": "python", "arguments": {"code": ')
    reply, reward, terminated, _, info = env.step(action)
    assert (reply, reward, terminated) == ([{"role": "tool", "content": env.task.answer}], 0.0, False)
    assert info["verdict"].info["tool_status"] == "ok"
    _, reward, terminated, _, info = env.step(env.reference_action())
    assert (reward, terminated, info["verdict"].outcome) == (1.0, True, Outcome.CORRECT)
    env.reset(seed=5)
    reply, _, terminated, _, info = env.step(call("python", source="print(1)"))
    assert not terminated and info["verdict"].outcome is Outcome.FORMAT_ERROR and "'code'" in reply[0]["content"]
    # The loop runs out its time limit: 1 s here (the reference above keeps the default 5 s' room).
    looping = PythonToolEnv(sandbox=box, tool_format="hermes", tool_timeout_s=1.0)
    looping.reset(seed=5)
    reply, *_ = looping.step(call("python", code="while True:\n    pass"))
    assert reply[0]["content"].endswith("[stopped: time limit of 1s exceeded]")


@pytest.mark.docker
@pytest.mark.parametrize("tool_format", ["markdown", "hermes"])
def test_python_tool_passes_the_checkers(box, tool_format):
    assert PythonToolEnv().chat_tools is None  # the default keeps the prompt's ```python syntax
    envs.check_env(envs.make("rlvr/PythonTool-v0", tool_format=tool_format), seeds=(0, 1))
    gym_check_env(PythonToolEnv(sandbox=box, tool_format=tool_format), skip_render_check=True)


def test_python_tool_bad_format():
    with pytest.raises(ValueError, match="tool_format"):
        PythonToolEnv(tool_format="xml")
