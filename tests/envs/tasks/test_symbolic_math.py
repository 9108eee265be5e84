"""rlvr/SymbolicMath-v0: generated problems are mathematically right (checked with independent
SymPy operations), equivalent answers are accepted, and the form checks are enforced."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from rlvr import envs
from rlvr.envs import Task
from rlvr.envs.tasks.symbolic_math import KINDS, SymbolicMathEnv, X, is_expanded, is_factored, make_problem
from rlvr.verifiers.verdict import Outcome


def _problems(kind: str, difficulty: int, n: int = 12):
    return [make_problem(kind, difficulty, np.random.default_rng([s, difficulty])) for s in range(n)]


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_references_are_correct(difficulty):
    for p in _problems("expand", difficulty):
        assert sp.expand(p.source - p.solution) == 0 and is_expanded(p.solution)
    for p in _problems("factor", difficulty):
        assert sp.expand(p.solution - p.source) == 0 and is_factored(p.solution)
        assert p.solution != p.source  # something to factor: the question is not its own answer
    for p in _problems("simplify", difficulty):
        assert sp.cancel(p.source - p.solution) == 0
    for p in _problems("diff", difficulty):
        assert sp.simplify(sp.diff(p.source, X) - p.solution) == 0
    for p in _problems("integrate", difficulty):
        assert sp.simplify(sp.diff(p.solution, X) - p.source) == 0
        assert p.solution.subs(X, 0) == 0  # the documented choice of constant: F(0) = 0
    for p in _problems("solve", difficulty):
        eq = p.source
        roots = sp.FiniteSet(*sp.solve(eq, X))
        assert roots == p.solution and all(sp.simplify(eq.lhs.subs(X, r) - eq.rhs.subs(X, r)) == 0 for r in roots)


def test_worked_example_factor_and_its_latex():
    # x^2 + 8x + 15 = (x + 3)(x + 5): find a difficulty-1 factor task with these roots.
    p = next(p for p in _problems("factor", 1, 200) if p.source == X**2 + 8 * X + 15)
    assert p.answer == "\\left(x + 3\\right) \\left(x + 5\\right)"
    assert "Factor $x^{2} + 8 x + 15$ completely." in p.question


def _task(kind: str, answer: str) -> Task:
    return Task(
        "0",
        [{"role": "user", "content": "?"}],
        answer,
        f"\\boxed{{{answer}}}",
        "\\boxed{0}",
        {"kind": kind, "difficulty": 1},
    )


@pytest.mark.parametrize(
    "kind,answer,response,score",
    [
        ("simplify", "x^{2} - 1", "\\boxed{(x-1)(x+1)}", 1.0),  # equivalence really needed
        ("simplify", "x^{2} - 1", "\\boxed{(x-1)(x-1)}", 0.0),
        ("expand", "x^{2} - 1", "\\boxed{-1 + x^2}", 1.0),
        ("expand", "x^{2} - 1", "\\boxed{(x-1)(x+1)}", 0.0),  # equivalent but not expanded
        ("factor", "\\left(x - 1\\right) \\left(x + 1\\right)", "\\boxed{(x+1)(x-1)}", 1.0),
        ("factor", "\\left(x - 1\\right) \\left(x + 1\\right)", "\\boxed{x^2-1}", 0.0),  # just the question
        ("factor", "2 \\left(x + 1\\right) \\left(x + 2\\right)", "\\boxed{(2x+2)(x+2)}", 1.0),  # 2 left inside
        ("factor", "2 \\left(x + 1\\right) \\left(x + 2\\right)", "\\boxed{2(x^2+3x+2)}", 0.0),
        ("factor", "2 \\left(x + 1\\right) \\left(x + 2\\right)", "\\boxed{2(x+2)(x+1)}", 1.0),
        ("diff", "2 x \\cos{\\left(x^{2} \\right)}", "\\boxed{2x\\cos(x^2)}", 1.0),
        ("integrate", "1 - \\cos{\\left(x \\right)}", "\\boxed{-\\cos x + 1}", 1.0),
        ("integrate", "1 - \\cos{\\left(x \\right)}", "\\boxed{-\\cos x}", 0.0),  # F(0) != 0
        ("solve", "\\left\\{-2, 3\\right\\}", "\\boxed{\\{3, -2\\}}", 1.0),
        ("solve", "\\left\\{-2, 3\\right\\}", "\\boxed{\\{3\\}}", 0.0),
    ],
)
def test_equivalence_and_form(kind, answer, response, score):
    verdict = SymbolicMathEnv().verify(_task(kind, answer), response)
    assert verdict.score == score, verdict.detail
    if score == 0.0 and kind in ("expand", "factor") and "(x-1)(x-1)" not in response:
        assert verdict.outcome is Outcome.INCORRECT


def test_form_checks_on_sympy_trees():
    parse = lambda s: sp.parse_expr(s, evaluate=False)  # noqa: E731
    assert is_expanded(parse("x**3 - 2*x + 1")) and not is_expanded(parse("x*(x + 1)"))
    assert not is_expanded(parse("(x + 1)**2"))
    assert is_factored(parse("-3*(x + 1)**2*(x**2 + 4)")) and not is_factored(parse("(x**2 - 1)*(x + 5)"))
    assert is_factored(parse("(2*x + 4)*(x + 1)"))
    assert is_factored(parse("(x + 1)*(x + 1)"))  # a repeated factor written out: each factor is irreducible
    assert not is_factored(parse("(x**40 - 1)*(x + 1)"))  # beyond the degree bound: refused without factoring


def test_seeds_kinds_and_task_ids():
    env = SymbolicMathEnv(kinds=["diff", "integrate"], difficulty=2)
    obs_a, info_a = env.reset(seed=7)
    obs_b, info_b = env.reset(seed=7)
    assert obs_a == obs_b and info_a == info_b
    assert env.task.metadata["kind"] in ("diff", "integrate")
    assert env.reset(options={"task_id": info_a["task_id"]})[0] == obs_a
    kinds = {SymbolicMathEnv(kinds="solve").reset(seed=s)[0][0]["content"].split()[0] for s in range(5)}
    assert kinds <= {"Solve", "Find"}


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"kinds": ["expand", "integral"]}, "kinds must be a non-empty subset"),
        ({"kinds": []}, "kinds must be a non-empty subset"),
        ({"difficulty": 4}, "difficulty must be 1, 2 or 3"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(envs.EnvArgumentError, match=match):
        envs.make("rlvr/SymbolicMath-v0", **kwargs)


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_passes_check_env(difficulty):
    envs.check_env(envs.make("rlvr/SymbolicMath-v0", difficulty=difficulty), seeds=range(6))


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_passes_check_env(kind):
    envs.check_env(envs.make("rlvr/SymbolicMath-v0", kinds=kind, difficulty=3), seeds=range(2), group_size=2)
