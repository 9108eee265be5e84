"""`rlvr/SymbolicMath-v0`: procedural algebra and calculus generated with SymPy.

Kinds (knob `kinds`, default all): expand, factor, simplify, diff, integrate, solve; knob
`difficulty` 1-3 (bigger degrees and coefficients, then products and compositions of sin, cos,
exp, log, irrational roots). The reference answer is SymPy's result as LaTeX (`sympy.latex`),
and any answer that `verifiers.math` finds mathematically equivalent scores 1, e.g. for the
simplify reference `x^{2} - 1` also `(x-1)(x+1)`. Two kinds also ask for a form, because the
question itself is already equivalent to the answer: an "expand" answer must contain no product
or power of a sum, a "factor" answer must be a product of factors irreducible over the rationals.

Integrals: an antiderivative is only defined up to a constant, so the prompt asks for the one
with F(0) = 0 (every integrand here is defined at 0). That makes the reference unique and the
check a plain equivalence; an answer with a different constant, or with "+ C", is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
import sympy as sp

from rlvr.envs.core import ProceduralTasks, SingleTurnEnv, Task
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.verdict import Outcome, Verdict

KINDS = ("expand", "factor", "simplify", "diff", "integrate", "solve")
X = sp.Symbol("x")
BOX = " Give the final answer as \\boxed{...}."


@dataclass(frozen=True)
class Problem:
    """One generated problem: the question (LaTeX inside text), the reference and a wrong answer
    as LaTeX, and as SymPy objects what the question operates on and the solution."""

    kind: str
    question: str
    answer: str
    wrong: str
    source: sp.Basic
    solution: sp.Basic


def _nonzero(rng: np.random.Generator, lo: int, hi: int) -> int:
    v = 0
    while v == 0:
        v = int(rng.integers(lo, hi + 1))
    return v


def _linear(rng: np.random.Generator, lead: int, const: int) -> sp.Expr:
    return _nonzero(rng, 1, lead) * X + _nonzero(rng, -const, const)


def _product(rng: np.random.Generator, difficulty: int) -> sp.Expr:
    """A product of 2-4 small factors: what expand starts from and factor returns to."""
    if difficulty == 1:
        return (X + _nonzero(rng, -6, 6)) * (X + _nonzero(rng, -6, 6))
    if difficulty == 2:
        return _linear(rng, 3, 5) * _linear(rng, 2, 5) * (X + _nonzero(rng, -4, 4))
    return _linear(rng, 2, 4) ** 2 * (X**2 + _nonzero(rng, 1, 5)) * _nonzero(rng, -3, 3)


def _function(rng: np.random.Generator, difficulty: int) -> sp.Expr:
    """A function to differentiate or integrate (defined at 0)."""
    degree = int(rng.integers(2, 5))
    poly = sum(int(rng.integers(-5, 6)) * X**k for k in range(degree)) + _nonzero(rng, -4, 4) * X**degree
    if difficulty == 1:
        return sp.expand(poly)
    g = [sp.sin, sp.cos, sp.exp][int(rng.integers(3))]
    a = _nonzero(rng, -3, 3)
    if difficulty == 2:
        return _nonzero(rng, 1, 4) * X ** int(rng.integers(1, 3)) * g(a * X)
    h = [sp.sin, sp.cos, sp.exp][int(rng.integers(3))]
    return g(a * X) * h(_nonzero(rng, 1, 2) * X) + sp.log(X**2 + _nonzero(rng, 1, 4))


def _integrand(rng: np.random.Generator, difficulty: int) -> sp.Expr:
    if difficulty == 1:
        return _function(rng, 1)
    g = [sp.sin, sp.cos, sp.exp][int(rng.integers(3))]
    a = _nonzero(rng, -3, 3)
    if difficulty == 2:
        return _nonzero(rng, -4, 4) * g(a * X) + int(rng.integers(1, 6)) * X
    return X ** int(rng.integers(1, 3)) * g(a * X)  # by parts


def _set_latex(values: list[sp.Expr]) -> str:
    return sp.latex(sp.FiniteSet(*values))


def make_problem(kind: str, difficulty: int, rng: np.random.Generator) -> Problem:
    """A problem of `kind` at `difficulty`, fully determined by `rng`."""
    latex = sp.latex
    if kind in ("expand", "factor"):
        product = _product(rng, difficulty)
        expanded = sp.expand(product)
        if kind == "expand":
            q = f"Expand and simplify ${latex(product)}$." + BOX
            return Problem(kind, q, latex(expanded), latex(expanded + 1), product, expanded)
        factored = sp.factor(expanded)
        q = f"Factor ${latex(expanded)}$ completely." + BOX
        return Problem(kind, q, latex(factored), latex(sp.Mul(2, factored, evaluate=False)), expanded, factored)
    if kind == "simplify":
        keep = _product(rng, 1) if difficulty >= 2 else X + _nonzero(rng, -6, 6)
        cancel = X + _nonzero(rng, -6, 6) if difficulty < 3 else _linear(rng, 2, 5) * (X + _nonzero(rng, 1, 5))
        frac = f"\\frac{{{latex(sp.expand(keep * cancel))}}}{{{latex(sp.expand(cancel))}}}"
        if difficulty == 3:  # a rational answer: the remaining fraction must be simplified too
            keep = keep / (X + _nonzero(rng, 7, 9))
            frac = (
                f"\\frac{{{latex(sp.expand(sp.numer(keep) * cancel))}}}{{{latex(sp.expand(sp.denom(keep) * cancel))}}}"
            )
        answer = sp.expand(keep) if difficulty < 3 else sp.cancel(keep)
        q = f"Simplify ${frac}$ (for $x$ where it is defined)." + BOX
        source = sp.Mul(keep * cancel, sp.Pow(cancel, -1), evaluate=False)
        return Problem(kind, q, latex(answer), latex(answer + 1), source, answer)
    if kind == "diff":
        f = _function(rng, difficulty)
        d = sp.diff(f, X)
        q = f"Differentiate $f(x) = {latex(f)}$ with respect to $x$." + BOX
        return Problem(kind, q, latex(d), latex(d + 1), f, d)
    if kind == "integrate":
        f = _integrand(rng, difficulty)
        big_f = sp.integrate(f, X)
        big_f = big_f - big_f.subs(X, 0)
        big_f = sp.expand(big_f) if big_f.is_polynomial(X) else big_f
        q = f"Find the antiderivative $F(x)$ of $f(x) = {latex(f)}$ with $F(0) = 0$." + BOX
        return Problem(kind, q, latex(big_f), latex(big_f + 1), f, big_f)
    if kind == "solve":
        return _solve_problem(rng, difficulty)
    raise ValueError(f"unknown kind {kind!r}; kinds are {KINDS}")


def _solve_problem(rng: np.random.Generator, difficulty: int) -> Problem:
    latex = sp.latex
    if difficulty == 1:
        s, a, b = int(rng.integers(-9, 10)), _nonzero(rng, 2, 9), int(rng.integers(-9, 10))
        c = int(rng.integers(-9, 10))
        c = c if c != a else c + 1
        eq = sp.Eq(a * X + b, c * X + (a - c) * s + b)
        return Problem("solve", f"Solve ${latex(eq)}$ for $x$." + BOX, str(s), str(s + 1), eq, sp.FiniteSet(s))
    if difficulty == 2:
        r1 = int(rng.integers(-9, 10))
        r2 = r1 + _nonzero(rng, 1, 8)
        lhs = sp.expand((X - r1) * (X - r2))
        roots = [sp.Integer(r1), sp.Integer(r2)]
    else:
        while True:  # x^2 + b x + c with two irrational real roots
            b, c = int(rng.integers(-8, 9)), int(rng.integers(-9, 3))
            disc = b * b - 4 * c
            if disc > 0 and sp.sqrt(disc).is_irrational:
                break
        lhs = X**2 + b * X + c
        roots = sorted(sp.solve(lhs, X), key=lambda r: float(r))
    q = f"Find all real solutions of ${latex(lhs)} = 0$. Give them as a set, e.g. \\boxed{{\\{{1, 2\\}}}}."
    return Problem(
        "solve", q, _set_latex(roots), _set_latex([r + 1 for r in roots]), sp.Eq(lhs, 0), sp.FiniteSet(*roots)
    )


def is_expanded(expr: sp.Expr) -> bool:
    """No product with a sum in it and no power of a sum, anywhere in the tree."""
    for node in sp.preorder_traversal(expr):
        if isinstance(node, sp.Mul) and any(isinstance(a, sp.Add) for a in node.args):
            return False
        if isinstance(node, sp.Pow) and isinstance(node.base, sp.Add) and node.exp.is_positive:
            return False
    return True


def is_factored(expr: sp.Expr) -> bool:
    """A constant times powers of polynomials that are irreducible over the rationals. A constant
    may stay inside a factor, `(2x + 4)(x + 1)`: the parser distributes `2(x + 2)` on reading."""
    bases = []
    for f in sp.Mul.make_args(expr):
        base = f.base if isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp > 0 else f
        if base.is_number:
            continue
        if not base.is_polynomial(X) or sp.degree(base, X) > _MAX_FORM_DEGREE:
            return False  # a quotient or a huge factor: not a factorisation of a small polynomial
        bases.append(base)
    for base in bases:
        _, parts = sp.factor_list(base, X)
        if len(parts) != 1 or parts[0][1] != 1:
            return False  # reducible (or a repeated factor inside one bracket)
    return True


_MAX_FORM_DEGREE = 12  # references have degree <= 4; bounds factor_list's work on hostile answers
FORM_CHECKS = {"expand": (is_expanded, "not expanded"), "factor": (is_factored, "not factored completely")}


def check_form(kind: str, response: str) -> str:
    """Why the final answer of `response` is not in the form `kind` asks for ("" if it is).
    Called only after `verifiers.math` judged the answer equivalent to the (small) reference."""
    from rlvr.verifiers.math.final_answer import extract
    from rlvr.verifiers.math.nodes import Expr, Relation
    from rlvr.verifiers.math.parse import parse_answer

    answers = extract(response).answers
    try:
        node = parse_answer(answers[-1])
    except (IndexError, ValueError):
        return "the answer could not be read for its form"
    if isinstance(node, Relation):  # "f(x) = ...": the form of the right-hand side
        node = node.parts[-1]
    if not isinstance(node, Expr):
        return "the answer is not an expression"
    test, problem = FORM_CHECKS[kind]
    return "" if test(node.value) else problem


@lru_cache(maxsize=4096)
def cached_problem(seed: int, difficulty: int, kinds: tuple[str, ...]) -> Problem:
    """The task for a seed. Cached (a pure function): integrating can take 0.1 s, and G copies of
    an env are reset onto the same task."""
    rng = np.random.default_rng([seed, difficulty])
    return make_problem(kinds[int(rng.integers(len(kinds)))], difficulty, rng)


class SymbolicMathEnv(ProceduralTasks, SingleTurnEnv):
    """Procedural algebra and calculus (expand, factor, simplify, diff, integrate, solve) made with SymPy."""

    version: ClassVar[str] = "0"

    def __init__(
        self, kinds: str | list[str] | tuple[str, ...] = KINDS, difficulty: int = 1, render_mode: str | None = None
    ):
        super().__init__(render_mode=render_mode)
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        bad = [k for k in kinds if k not in KINDS]
        if not kinds or bad:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {list(kinds)}")
        if isinstance(difficulty, bool) or difficulty not in (1, 2, 3):
            raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty!r}")
        self.kinds, self.difficulty = kinds, difficulty

    def make_task(self, seed: int) -> Task:
        p = cached_problem(seed, self.difficulty, self.kinds)
        return Task(
            task_id=str(seed),
            prompt=[{"role": "user", "content": p.question}],
            answer=p.answer,
            reference=f"\\boxed{{{p.answer}}}",
            wrong=f"\\boxed{{{p.wrong}}}",
            metadata={"kind": p.kind, "difficulty": self.difficulty},
        )

    def verify(self, task: Task, response: str) -> Verdict:
        verdict = math_verifier.verify(response, task.answer)
        kind = task.metadata["kind"]
        if verdict.outcome is Outcome.CORRECT and kind in FORM_CHECKS:
            problem = check_form(kind, response)
            if problem:
                return Verdict(0.0, Outcome.INCORRECT, f"equivalent, but {problem}", verdict.info)
        return verdict
