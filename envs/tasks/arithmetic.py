"""`rlvr/Arithmetic-v0`: procedural integer and fraction arithmetic.

difficulty 1: one + or - on numbers 0..9;  2 (default): one + or - on numbers 0..99;
3: two operations among + - * on numbers 0..99;  4: three operations with brackets;
5: sums and differences of fractions (the answer is a reduced fraction).
The model is asked for its final answer in `\\boxed{}`; any answer `verifiers.math` accepts
as equal scores 1.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np

from rlvr.envs.core import ProceduralTasks, SingleTurnEnv, Task
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.verdict import Verdict

PROMPT = "Compute {expr}. Give the final answer as \\boxed{{answer}}."


def _format(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _expression(rng: np.random.Generator, difficulty: int) -> str:
    if difficulty == 1:
        return f"{rng.integers(0, 10)} {rng.choice(['+', '-'])} {rng.integers(0, 10)}"
    if difficulty == 2:
        return f"{rng.integers(0, 100)} {rng.choice(['+', '-'])} {rng.integers(0, 100)}"
    if difficulty in (3, 4):
        n_ops = difficulty - 1
        terms = [str(rng.integers(0, 100 if difficulty == 3 else 20)) for _ in range(n_ops + 1)]
        ops = [str(rng.choice(["+", "-", "*"])) for _ in range(n_ops)]
        expr = terms[0]
        for i, (op, term) in enumerate(zip(ops, terms[1:])):
            expr = f"({expr} {op} {term})" if difficulty == 4 and i < n_ops - 1 else f"{expr} {op} {term}"
        return expr
    a, b = (Fraction(int(rng.integers(1, 10)), int(rng.integers(2, 10))) for _ in range(2))
    return f"{a.numerator}/{a.denominator} {rng.choice(['+', '-'])} {b.numerator}/{b.denominator}"


def _evaluate(expr: str) -> Fraction:
    # The expression is our own: digits, + - * / and brackets only. Fractions keep it exact;
    # every integer literal becomes one, also inside "3/4" (so "/" divides Fractions, not floats).
    src = re.sub(r"\d+", lambda m: f"Fraction({m.group(0)})", expr)
    return eval(src, {"__builtins__": {}, "Fraction": Fraction})  # noqa: S307 - trusted, generated above


class ArithmeticEnv(ProceduralTasks, SingleTurnEnv):
    """Procedural integer and fraction arithmetic (difficulty 1-5), answered in \\boxed{}."""

    version = "0"

    def __init__(self, difficulty: int = 2, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if difficulty not in (1, 2, 3, 4, 5):
            raise ValueError(f"difficulty must be 1..5, got {difficulty!r}")
        self.difficulty = difficulty

    def make_task(self, seed: int) -> Task:
        rng = np.random.default_rng([seed, self.difficulty])
        expr = _expression(rng, self.difficulty)
        value = _evaluate(expr)
        answer, wrong = _format(value), _format(value + 1)
        return Task(
            task_id=str(seed),
            prompt=[{"role": "user", "content": PROMPT.format(expr=expr)}],
            answer=answer,
            reference=f"\\boxed{{{answer}}}",
            wrong=f"\\boxed{{{wrong}}}",
            metadata={"difficulty": self.difficulty, "expression": expr},
        )

    def verify(self, task: Task, response: str) -> Verdict:
        return math_verifier.verify(response, task.answer)
