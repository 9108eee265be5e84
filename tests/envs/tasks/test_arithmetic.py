"""rlvr/Arithmetic-v0: worked numbers, and every difficulty passes the checker."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rlvr import envs
from rlvr.envs.tasks.arithmetic import ArithmeticEnv, _evaluate


@pytest.mark.parametrize(
    "expr,value",
    [
        ("3/4 + 1/2", Fraction(5, 4)),
        ("1/3 - 1/2", Fraction(-1, 6)),
        ("(3 - 5) * 2", -4),
        ("7 - 2 * 3", 1),
        ("((4 + 5) * 2) - 7", 11),
    ],
)
def test_evaluate_exactly(expr, value):
    assert _evaluate(expr) == value


def test_fraction_task_reference_is_reduced():
    env = ArithmeticEnv(difficulty=5)
    for seed in range(20):
        task = env.make_task(seed)
        assert Fraction(task.answer) == _evaluate(task.metadata["expression"])
        assert task.reference == f"\\boxed{{{task.answer}}}"


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_passes_check_env(difficulty):
    envs.check_env(envs.make("rlvr/Arithmetic-v0", difficulty=difficulty))
