"""`rlvr/PythonTool-v0`: multi-turn maths with a Python tool run in the sandbox.

A `ToolEnv` with one tool, `python(code)`, which runs `code` in the sandbox (python3, standard
library) and answers with its output (stdout, then stderr; capped) as a `tool`-role message
(`tool_role="user"` for chat templates without one). The call syntax depends on `tool_format`:
- `markdown` (the default, which the built-in tiny model was trained on), stated in the prompt: a
  reply whose last ```python block is not followed by a final answer is a tool call;
- `hermes`: the chat template lists the tool (`tools=`), and a call is
  `<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>`.
A reply containing `\\boxed{...}` is the final answer, checked by `verifiers.math`; it ends the
episode. A reply with neither is a format error and also ends it. After `max_turns` replies
without a final answer the episode is truncated. Tool turns get reward 0; the final answer gets
the verifier's score.

Tasks are procedural (the id is an integer seed): computations that are tedious by hand and
quick in Python (sums of primes, counting with divisibility, modular powers, Fibonacci numbers
modulo m, digit sums of factorials, divisor counts, Collatz steps). The reference action is a
tool call that computes the answer, then the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rlvr.envs.core import ProceduralTasks, Task
from rlvr.envs.tasks.code import SandboxUser
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import Tool, ToolOutput, ToolUnavailableError
from rlvr.sandbox.types import Limits, Status
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.verdict import Verdict

PROMPT = (
    "{question}\n\n"
    "You may run Python code: reply with a single ```python code block and nothing after it, and "
    "you will get back what it prints. Use print() to see results. When you know the answer, "
    "reply with it as \\boxed{{answer}}. You have {turns} replies in all."
)


def _primes(n: int) -> list[int]:
    primes, k = [], 2
    while len(primes) < n:
        if all(k % p for p in primes if p * p <= k):
            primes.append(k)
        k += 1
    return primes


def _fib_mod(n: int, m: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a


def _collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


# Each template: rng -> (question, answer, tool code). Answers are computed here, on the host.
def _t_primes(rng: np.random.Generator) -> tuple[str, int, str]:
    n = int(rng.integers(50, 501))
    code = (
        f"primes, k = [], 2\nwhile len(primes) < {n}:\n    if all(k % p for p in primes if p * p <= k):\n"
        "        primes.append(k)\n    k += 1\nprint(sum(primes))"
    )
    return f"What is the sum of the first {n} prime numbers?", sum(_primes(n)), code


def _t_divisible(rng: np.random.Generator) -> tuple[str, int, str]:
    n = int(rng.integers(10**5, 10**7))
    a, b = (int(x) for x in rng.choice(np.arange(2, 31), size=2, replace=False))
    answer = n // a + n // b - n // math.lcm(a, b)
    code = f"print(sum(1 for k in range(1, {n} + 1) if k % {a} == 0 or k % {b} == 0))"
    return f"How many integers from 1 to {n} inclusive are divisible by {a} or by {b}?", answer, code


def _t_modpow(rng: np.random.Generator) -> tuple[str, int, str]:
    a, b, m = int(rng.integers(2, 10**6)), int(rng.integers(10**6, 10**12)), int(rng.integers(10**3, 10**9))
    return f"What is {a}^{b} modulo {m}?", pow(a, b, m), f"print(pow({a}, {b}, {m}))"


def _t_fib(rng: np.random.Generator) -> tuple[str, int, str]:
    n, m = int(rng.integers(100, 10001)), int(rng.integers(1000, 10**6))
    code = f"a, b = 0, 1\nfor _ in range({n}):\n    a, b = b, (a + b) % {m}\nprint(a)"
    question = f"With F(1) = F(2) = 1 and F(k) = F(k-1) + F(k-2), what is F({n}) modulo {m}?"
    return question, _fib_mod(n, m), code


def _t_factorial_digits(rng: np.random.Generator) -> tuple[str, int, str]:
    k = int(rng.integers(20, 201))
    answer = sum(int(d) for d in str(math.factorial(k)))
    code = f"import math\nprint(sum(int(d) for d in str(math.factorial({k}))))"
    return f"What is the sum of the decimal digits of {k}! ({k} factorial)?", answer, code


def _t_divisors(rng: np.random.Generator) -> tuple[str, int, str]:
    exps = {p: int(rng.integers(0, 4)) for p in (2, 3, 5, 7, 11, 13)}
    exps[int(rng.choice([17, 19, 23, 29]))] = 1
    n = math.prod(p**e for p, e in exps.items())
    answer = math.prod(e + 1 for e in exps.values())
    code = f"n = {n}\nprint(sum(2 - (d * d == n) for d in range(1, int(n ** 0.5) + 1) if n % d == 0))"
    return f"How many positive divisors does {n} have?", answer, code


def _t_collatz(rng: np.random.Generator) -> tuple[str, int, str]:
    n = int(rng.integers(1000, 10**6))
    code = (
        f"n, steps = {n}, 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n    steps += 1\nprint(steps)"
    )
    question = (
        f"Starting from {n}, repeatedly halve the number if it is even, otherwise replace it by "
        "3n + 1. How many steps does it take to reach 1?"
    )
    return question, _collatz_steps(n), code


TEMPLATES: dict[str, Callable[[np.random.Generator], tuple[str, int, str]]] = {
    "primes_sum": _t_primes,
    "divisible_count": _t_divisible,
    "modpow": _t_modpow,
    "fib_mod": _t_fib,
    "factorial_digit_sum": _t_factorial_digits,
    "divisor_count": _t_divisors,
    "collatz_steps": _t_collatz,
}


def format_tool_output(
    stdout: str, stderr: str, status: Status, exit_code: int | None, timeout_s: float, max_chars: int
) -> str:
    """What the model sees after a tool call: output, errors and why it stopped, capped."""
    parts = [stdout.rstrip("\n")] if stdout.strip() else []
    if stderr.strip():
        parts.append(stderr.rstrip("\n"))
    if status is Status.TIMEOUT:
        parts.append(f"[stopped: time limit of {timeout_s:g}s exceeded]")
    elif status is Status.MEMORY:
        parts.append("[stopped: memory limit exceeded]")
    elif status is Status.OUTPUT_LIMIT:
        parts.append("[stopped: output limit exceeded]")
    elif status is not Status.OK or exit_code not in (0, None):
        parts.append(f"[exit code {exit_code}]")
    text = "\n".join(parts) or "[no output: use print() to see values]"
    if len(text) > max_chars:
        text = text[: max_chars // 2] + "\n[... output truncated ...]\n" + text[-max_chars // 2 :]
    return text


PYTHON_TOOL_DESCRIPTION = (
    "Run a Python 3 program (standard library only) and return what it prints: "
    "stdout, then stderr. Use print() to see results."
)
PYTHON_TOOL_PARAMETERS = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "the program to run"}},
    "required": ["code"],
    "additionalProperties": False,
}
PROMPT_HERMES = (
    "{question}\n\n"
    "You may call the python tool to run code, and you will get back what it prints. Use print() to "
    "see results. When you know the answer, reply with it as \\boxed{{answer}}. You have {turns} replies in all."
)


class PythonToolEnv(SandboxUser, ProceduralTasks, ToolEnv):
    """Multi-turn maths with a sandboxed Python tool; the final \\boxed{} answer is checked by verifiers.math.

    `tool_format="markdown"` (the default): the prompt teaches ```python blocks as the call syntax.
    `tool_format="hermes"`: the tool `python(code)` is listed by the chat template (`tools=`) and
    called as `<tool_call>{"name": "python", "arguments": {"code": ...}}</tool_call>`."""

    version = "0"

    def __init__(
        self,
        max_turns: int = 4,
        tool_timeout_s: float = 5.0,
        max_output_chars: int = 2000,
        tool_role: str = "tool",
        templates: tuple[str, ...] | None = None,
        sandbox: Any = None,
        tool_format: str = "markdown",
        render_mode: str | None = None,
    ):
        if max_turns < 2:
            raise ValueError(f"max_turns must be >= 2 (a tool call, then an answer), got {max_turns}")
        if tool_role not in ("tool", "user"):
            raise ValueError(f"tool_role must be 'tool' or 'user', got {tool_role!r}")
        unknown = set(templates or ()) - set(TEMPLATES)
        if unknown or (templates is not None and not templates):
            raise ValueError(f"templates must be a non-empty subset of {sorted(TEMPLATES)}, got {templates!r}")
        if not tool_timeout_s > 0 or max_output_chars < 100:
            raise ValueError("tool_timeout_s must be positive and max_output_chars >= 100")
        if tool_format not in ("markdown", "hermes"):
            raise ValueError(f"tool_format must be 'markdown' or 'hermes', got {tool_format!r}")
        # The sandbox bounds the program; the tool's own bound only catches a sandbox that hangs.
        python = Tool(
            "python", PYTHON_TOOL_DESCRIPTION, PYTHON_TOOL_PARAMETERS, self._python, timeout_s=2 * tool_timeout_s + 60.0
        )
        super().__init__(
            tools=[python],
            tool_format=tool_format,
            max_turns=max_turns,
            max_calls_per_turn=1,
            max_output_chars=max_output_chars,
            tool_role=tool_role,
            render_mode=render_mode,
        )
        self.templates = tuple(templates) if templates else tuple(TEMPLATES)
        self.tool_timeout_s = float(tool_timeout_s)
        self.sandbox = sandbox

    def make_task(self, seed: int) -> Task:
        rng = np.random.default_rng([seed, 7])
        name = self.templates[int(rng.integers(0, len(self.templates)))]
        question, answer, code = TEMPLATES[name](rng)
        prompt = PROMPT if self.tool_format == "markdown" else PROMPT_HERMES
        return Task(
            task_id=str(seed),
            prompt=[{"role": "user", "content": prompt.format(question=question, turns=self.max_turns)}],
            answer=str(answer),
            reference=self.format_call("python", code=code),
            wrong=f"\\boxed{{{answer + 1}}}",
            metadata={"template": name},
        )

    def reference_action(self) -> str:
        """A tool call computing the answer, then the answer."""
        return self.task.reference if self.tool_calls == 0 else f"The answer is \\boxed{{{self.task.answer}}}."

    def final_answer(self, action: str) -> Verdict | None:
        return math_verifier.verify(action, self.task.answer) if "\\boxed" in action else None

    def _python(self, code: str) -> ToolOutput:
        """The tool: `code` run in the sandbox (python3, standard library), its output capped."""
        try:
            result = self.get_sandbox().run(
                files={"tool.py": code},
                command=["python3", "tool.py"],
                stdin="",
                limits=Limits(timeout_s=self.tool_timeout_s, output_bytes=4 * self.max_output_chars + 1024),
            )
        except Exception as exc:  # noqa: BLE001 - the sandbox failing is the grader's error, not the model's
            raise ToolUnavailableError(f"sandbox call failed: {type(exc).__name__}: {exc}") from None
        if result.status is Status.UNAVAILABLE:
            raise ToolUnavailableError(f"sandbox unavailable: {result.detail}")
        output = format_tool_output(
            result.stdout, result.stderr, result.status, result.exit_code, self.tool_timeout_s, self.max_output_chars
        )
        return ToolOutput(output, {"tool_status": str(result.status), "tool_exit_code": result.exit_code})
