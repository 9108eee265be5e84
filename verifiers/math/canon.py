"""Canonical forms before comparison: `\\pm` expanded into two answers, `x \\in S` into S,
one-variable inequalities into intervals (`1 < x <= 2` is `(1, 2]`; `|x - 1| < 2` is `(-1, 3)`;
also a named quantity: `0 < f(x) < 1` is `(0, 1)`, since the answer states the range of f(x)), chains `x = 4/2 = 2`
into their ends, lists of inequalities into unions or intersections (`x < -1 \\text{ or } x > 2`
is `(-\\infty, -1) \\cup (2, \\infty)`; "and" intersects)."""

from __future__ import annotations

import sympy

from rlvr.verifiers.math import build, intervals
from rlvr.verifiers.math.build import PM
from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.nodes import (
    Bracket,
    Expr,
    Listing,
    Node,
    Relation,
    SetExpr,
    SetOf,
    as_expr,
    has_decimal,
    literals,
)

INEQUALITIES = {"<", "<=", ">", ">="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def canon(node: Node) -> Node:
    if isinstance(node, Expr):
        if node.value.has(PM):
            return SetOf(_pm_pair(node))
        return node
    if isinstance(node, Relation):
        return _relation(node)
    if isinstance(node, Bracket):
        return Bracket(tuple(canon(x) for x in node.items), node.open, node.close)
    if isinstance(node, SetOf):
        return SetOf(_flatten(node.items))
    if isinstance(node, Listing):
        return _listing(node)
    return node


def _pm_pair(e: Expr) -> tuple[Expr, ...]:
    plus, minus = (Expr(e.value.xreplace({PM: sympy.Integer(s)}), e.has_decimal, None, e.unit) for s in (1, -1))
    return (plus,) if plus.value == minus.value else (plus, minus)


def _has_pm(node: Node) -> bool:
    parts = node.parts if isinstance(node, Relation) else (node,)
    return any(isinstance(p, Expr) and p.value.has(PM) for p in parts)


def _flatten(items: tuple[Node, ...]) -> tuple[Node, ...]:
    """Canonical items; the two answers of a `\\pm` join the surrounding list."""
    out: list[Node] = []
    for x in items:
        c = canon(x)
        out.extend(c.items if isinstance(c, SetOf) and _has_pm(x) else (c,))
    return tuple(out)


def _relation(rel: Relation) -> Node:
    if rel.ops == ("in",):
        return canon(rel.parts[1])
    if "~" in rel.ops:  # 7/12 \approx 0.583: the exact value stated before its approximation counts
        k = rel.ops.index("~")
        if k == 0 and is_variable(rel.parts[0]):
            rel = Relation(tuple("=" if op == "~" else op for op in rel.ops), rel.parts)
        elif k == 0:
            return canon(rel.parts[0])
        else:
            rel = Relation(rel.ops[:k], rel.parts[: k + 1])
    pm = [i for i, p in enumerate(rel.parts) if isinstance(p, Expr) and p.value.has(PM)]
    if pm and all(op == "=" for op in rel.ops):  # x = 1 \pm 2 is x = 3 or x = -1
        i = pm[-1]
        return SetOf(
            tuple(
                _relation(Relation(rel.ops, rel.parts[:i] + (e,) + rel.parts[i + 1 :])) for e in _pm_pair(rel.parts[i])
            )
        )
    if all(op == "=" for op in rel.ops):
        if len(rel.parts) > 2:  # x = \frac{4}{2} = 2: the first and the final form
            rel = Relation(("=",), (rel.parts[0], rel.parts[-1]))
        lhs, rhs = rel.parts
        named = _named_tuple(lhs, rhs)
        if named is not None:
            return named
        if is_variable(rhs) and not is_variable(lhs):
            rel = Relation(("=",), (rhs, lhs))
        return rel
    if all(op in INEQUALITIES | {"!="} for op in rel.ops):
        interval = _interval(rel)
        if interval is not None:
            return SetExpr(interval, has_decimal(rel), literals(rel))
    return rel


def _named_tuple(lhs: Node, rhs: Node) -> Listing | None:
    """`(p, q) = (3, 2)` names each value: read as the assignments p = 3, q = 2."""
    if not (isinstance(lhs, Bracket) and isinstance(rhs, Bracket) and len(lhs.items) == len(rhs.items)):
        return None
    names = [x.value for x in lhs.items if isinstance(x, Expr) and x.value.is_Symbol]
    if len(names) != len(lhs.items) or len(set(names)) != len(names) or (rhs.open, rhs.close) != ("(", ")"):
        return None
    pairs = tuple(Relation(("=",), (var, canon(value))) for var, value in zip(lhs.items, rhs.items))
    return Listing(pairs, (",",) * (len(pairs) - 1))


def is_variable(node: Node) -> bool:
    """A left-hand side naming the answer: `x`, `x_1`, `f(x)` (read as f*x), `xy`."""
    if not isinstance(node, Expr):
        return False
    v = node.value
    factors = v.args if v.is_Mul else (v,)  # f(x) reads as f*x, f^{-1}(x) as x/f, P(A) as P*A
    return all(f.is_Symbol or f.is_Pow and f.base.is_Symbol and f.exp.is_Integer for f in factors)


def is_assignment(node: Node) -> bool:
    return isinstance(node, Relation) and node.ops == ("=",) and is_variable(node.parts[0])


def _interval(rel: Relation) -> intervals.Pieces | None:
    """The solution set of a one-variable linear inequality chain (`1 < x <= 2`, `-x > -1`,
    `2x + 1 < 5`) with constant bounds, else None."""
    parts = rel.parts
    if not all(isinstance(p, Expr) for p in parts) or any(p.value.has(PM) for p in parts):
        return None
    symbols = set().union(*(p.value.free_symbols for p in parts))
    if len(symbols) > 1:
        # 0 < f(x) < 1, 1 \le ab \le 2: one named quantity (every non-constant part the same
        # product of letters, see is_variable) ranging over an interval, as one unknown
        named = {p.value for p in parts if p.value.free_symbols}
        if len(named) != 1 or not is_variable(Expr(next(iter(named)))):
            return None
        x = sympy.Dummy("q")
        parts = tuple(Expr(x, p.has_decimal, p.literal) if p.value.free_symbols else p for p in parts)
        symbols = {x}
    if len(symbols) != 1:
        return None
    x = symbols.pop()
    result = intervals.REALS
    try:
        for left, op, right in zip(parts, rel.ops, parts[1:]):
            piece = _solve(left.value - right.value, op, x)
            if piece is None:
                return None
            result = intervals.intersect(result, piece)
    except ParseError:  # a bound that is not a real number
        return None
    return result


def _solve(f: sympy.Basic, op: str, x: sympy.Symbol) -> intervals.Pieces | None:
    """The reals where `f op 0`, for f linear in x or linear in one `|u|` with u linear in x
    (`|x| < 3` is `(-3, 3)`, `|x - 1| >= 2` is `(-\\infty, -1] \\cup [3, \\infty)`), else None."""
    absolutes = f.atoms(sympy.Abs)
    if not absolutes:
        return _linear(f, op, x)
    if len(absolutes) != 1:
        return None
    (u_abs,) = absolutes
    t = sympy.Dummy("t")
    g = f.xreplace({u_abs: t})
    k = g.diff(t)
    if x in g.free_symbols or k.free_symbols or not k.is_extended_real or k == 0:
        return None
    c = -(g - k * t) / k  # |u| op c, op flipped when k < 0
    op = _FLIP.get(op, op) if k.is_negative else op
    u = u_abs.args[0]
    sign = 1 if c.is_positive else 0 if c.is_zero else -1 if c.is_negative else None
    if sign is None:
        return None
    if op in ("<", "<="):
        if sign < 0 or sign == 0 and op == "<":
            return intervals.EMPTY
        return _both(_linear(u + c, {"<": ">", "<=": ">="}[op], x), _linear(u - c, op, x), intervals.intersect)
    if op in (">", ">="):
        if sign < 0 or sign == 0 and op == ">=":
            return intervals.REALS
        return _both(_linear(u - c, op, x), _linear(u + c, {">": "<", ">=": "<="}[op], x), intervals.union)
    if op == "!=":
        return intervals.REALS if sign < 0 else _both(_linear(u - c, op, x), _linear(u + c, op, x), intervals.intersect)
    return None


def _both(a: intervals.Pieces | None, b: intervals.Pieces | None, combine) -> intervals.Pieces | None:
    return None if a is None or b is None else combine(a, b)


def _linear(f: sympy.Basic, op: str, x: sympy.Symbol) -> intervals.Pieces | None:
    """The reals where `f op 0` for f = a*x + b (a real, nonzero): x op' -b/a, op flipped when a < 0."""
    a = f.diff(x)
    if a.free_symbols or not a.is_extended_real or a == 0 or (f - a * x).free_symbols:
        return None
    bound = -(f - a * x) / a
    if a.is_negative:
        op = _FLIP.get(op, op)
    oo = sympy.oo
    return {
        "<": lambda: intervals.interval(-oo, bound, True, True),
        "<=": lambda: intervals.interval(-oo, bound, True, False),
        ">": lambda: intervals.interval(bound, oo, True, True),
        ">=": lambda: intervals.interval(bound, oo, False, True),
        "!=": lambda: intervals.complement(intervals.points([bound])),
    }[op]()


def _listing(node: Listing) -> Node:
    items = _flatten(node.items)
    pairs = list(zip(node.items, items))
    if any(_in_interval(x) for x in node.items) and all(_in_interval(x) or isinstance(c, SetExpr) for x, c in pairs):
        # x \in (-\infty, -1) or x \in (2, \infty): each item a set, not a pair
        try:
            items = tuple(SetExpr(as_set(c), has_decimal(c), literals(c)) if _in_interval(x) else c for x, c in pairs)
        except (ParseError, ValueError, TypeError):
            return Listing(items, node.joiners)
    if 1 < len(items) <= intervals.MAX_PIECES and all(isinstance(x, SetExpr) for x in items):
        sets = [x.value for x in items]
        decimal = any(x.has_decimal for x in items)
        lits = literals(Listing(items))
        both = sets[0]
        for s in sets[1:]:
            both = intervals.intersect(both, s)
        if "and" in node.joiners:
            return SetExpr(both, decimal, lits)
        if "or" in node.joiners or not both:  # "x > 1, x < 3" is both; "x < 1, x > 2" is either
            return SetExpr(intervals.union(*sets), decimal, lits)
        return SetExpr(both, decimal, lits)
    return Listing(items, node.joiners)


def _in_interval(node: Node) -> bool:
    """`x \\in [1, 2]`: a relation naming a two-ended interval."""
    if not (isinstance(node, Relation) and node.ops == ("in",)):
        return False
    return isinstance(node.parts[1], Bracket) and len(node.parts[1].items) == 2


def to_set(node: Node) -> intervals.Pieces | None:
    """The node as a subset of the reals where it reads as one (an interval, a set expression)."""
    try:
        if isinstance(node, SetExpr):
            return node.value
        if isinstance(node, Bracket) and len(node.items) == 2:
            return as_set(node)
    except (ParseError, ValueError, TypeError):
        return None
    return None


def as_set(node: Node) -> intervals.Pieces:
    """An interval, a finite set of numbers or a set expression as real-line pieces."""
    if isinstance(node, SetExpr):
        return node.value
    if isinstance(node, SetOf):
        return intervals.points(build.plain(as_expr(x)) for x in node.items)
    if isinstance(node, Bracket) and len(node.items) == 2:
        lo, hi = (build.plain(as_expr(x)) for x in node.items)
        if lo.has(PM) or hi.has(PM):
            raise ParseError("\\pm in an interval")
        return intervals.interval(lo, hi, node.open == "(", node.close == ")")
    raise ParseError(f"{type(node).__name__} is not a set")
