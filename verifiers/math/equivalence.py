"""Whether an answer node means the same as the gold node. The gold decides the reading:
a set gold compares order-free, a tuple gold in order, an interval gold by endpoints and
brackets, numbers exactly or by the decimal rules of `decimals` (no tolerance).

Rules on kinds of answers (each closes a way to be paid for a wrong answer):
- Sets are not intervals or tuples: `[1, 2]`, `(1, 2)` or `[1, 2)` are not the finite set
  `\\{1, 2\\}`, and `\\{1, 2\\}` or the list `1, 2` is not the interval `[1, 2]`. A plain list
  gold `1, 2` accepts `\\{1, 2\\}` and `(1, 2)` (its values), never a bracket that
  is only an interval (`[1, 2]`). An interval equals an inequality or a union of them with the
  same set (`-2 \\le x \\le 7`, `x \\in [-2, 7]`; see `canon`).
- Percent and degree marks are part of the number (`_readings`): `25\\%` is 0.25, so it is
  right for gold `0.25` but not for gold `25`; a gold `25\\%` accepts `25` and `0.25`. A degree
  answer is converted to radians only for a gold written with pi (`\\frac{\\pi}{6}`), never for
  a plain number (`180^\\circ` is not `3.14`, `30^\\circ` is not `0.524`).
- Units of measure are compared and converted (`units`, `_in_gold_unit`): `500 cm` is `5 m`,
  `5 km` is not `5 m`, `5 kg` is not `5 m`; one side without a unit compares the numbers. A
  quantity in mixed units (`3 hours and 20 minutes`, each unit smaller than the one before) is
  their sum, for a gold with a unit only (`_mixed_units`).
- Expressions in variables are equal only by `numeric.functions_equal`: points over many
  magnitudes, and a symbolic proof for steps and kinks (floor, |.|, max).
- Upright constants: `\\text{e}` and `\\mathrm{e}` (read as a letter) are Euler's number e.
"""

from __future__ import annotations

import sympy

from rlvr.verifiers.math import intervals, units
from rlvr.verifiers.math.build import ten_power
from rlvr.verifiers.math.canon import INEQUALITIES, is_assignment, is_variable, to_set
from rlvr.verifiers.math.decimals import rounded_equal
from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.nodes import (
    BaseNumber,
    Bracket,
    Expr,
    Listing,
    Matrix,
    Node,
    Relation,
    SetExpr,
    SetOf,
    Text,
    literals,
)
from rlvr.verifiers.math.numeric import functions_equal, numbers_equal, proportional
from rlvr.verifiers.math.options import MathOptions

MAX_MATCH = 48  # larger collections compare by exact canonical form only


def same(g: Node, a: Node, o: MathOptions) -> bool:
    """`g` and `a` are canonical nodes (see canon.canon)."""
    g, a = _single(g), _single(a)
    if is_assignment(a) and isinstance(g, (Matrix, Bracket, SetOf, SetExpr)):
        a = a.parts[1]  # A = (matrix), P = (3, 2), S = {1, 2}: the value named
    if isinstance(a, Listing) and isinstance(g, Expr) and g.measure is not None:
        a = _mixed_units(a) or a  # 3 hours and 20 minutes for 200 minutes
    if isinstance(a, (SetOf, Listing)) and not isinstance(g, (SetOf, Listing, Bracket)) and len(a.items) <= MAX_MATCH:
        values = _distinct(_values(a), o)  # "1 and 1" is one answer
        a = values[0] if len(values) == 1 else a
    if isinstance(a, Text) and isinstance(g, (SetExpr, Bracket)):
        gs = to_set(g)  # "all real numbers" for (-\infty, \infty)
        return gs is not None and _set_words(gs, a.text)
    if isinstance(g, Expr):
        return _same_as_expr(g, a, o)
    if isinstance(g, Relation):
        return _same_relation(g, a, o)
    if isinstance(g, SetExpr):
        if isinstance(a, Text):
            return _set_words(g.value, a.text)
        other = to_set(a) if not isinstance(a, SetOf) else _finite(a)
        return other is not None and sets_equal(g.value, other, g.literals, literals(a), o)
    if isinstance(g, (SetOf, Listing)) and isinstance(a, SetExpr):  # {1,3} \cup {2,4} for {1,2,3,4}
        points = _finite(SetOf(tuple(_values(g))))
        return points is not None and sets_equal(points, a.value, literals(g), a.literals, o)
    if isinstance(g, Bracket):
        return _same_bracket(g, a, o)
    if isinstance(g, (SetOf, Listing)):
        return _same_collection(g, a, o)
    if isinstance(g, Matrix):
        return _same_matrix(g, a, o)
    if isinstance(g, Text):
        return _same_text(g, a)
    if isinstance(g, BaseNumber):
        if isinstance(a, BaseNumber):  # written with its base, a number means its value
            return g.value() is not None and a.value() == g.value()
        # a plain answer to "in base b": the gold's digits (204 for 204_5, not 54)
        return (
            isinstance(a, Expr)
            and a.value.is_Integer
            and a.value >= 0
            and str(a.value) == (g.digits.lstrip("0") or "0")
        )
    return False


def _single(node: Node) -> Node:
    """A collection of one element is that element (`\\{2\\}`, `\\{1,2\\} \\cap \\{2,3\\}`)."""
    if isinstance(node, (SetOf, Listing)) and len(node.items) == 1:
        return node.items[0]
    if isinstance(node, SetExpr) and len(node.value) == 1 and node.value[0][0] == node.value[0][1]:
        point = node.value[0][0]
        return _endpoint(point, dict(node.literals))
    return node


def _finite(node: SetOf) -> intervals.Pieces | None:
    if all(isinstance(x, Expr) and not x.value.free_symbols for x in node.items):
        try:
            return intervals.points(x.value for x in node.items)
        except ParseError:
            return None
    return None


# -- numbers and expressions
def exprs_equal(g: Expr, a: Expr, o: MathOptions) -> bool:
    aligned = _in_gold_unit(g, a)
    if aligned is None:
        return False  # units of different kinds: 5 km for 5 kg
    g, a = aligned
    for (gv, gshift), (av, ashift) in _readings(g, a, o):
        if gv.free_symbols or av.free_symbols:
            if functions_equal(gv, av):
                return True
        elif numbers_equal(gv, av) or rounded_equal(g, gv, gshift, a, av, ashift, o):
            return True
    return False


def _in_gold_unit(g: Expr, a: Expr) -> tuple[Expr, Expr] | None:
    """The two sides with the answer converted into the gold's unit of measure (see `units`):
    unchanged when at most one side carries a unit, None when the units measure different things."""
    if g.measure is None and a.measure is not None:
        g = _symbol_measure(g)  # gold 5\mathrm{m} (read as 5 times m) against 500 cm
    elif a.measure is None and g.measure is not None:
        a = _symbol_measure(a)  # 5m against gold 5 \text{ m}
    if g.measure is None or a.measure is None:
        return g, a
    r = units.ratio(g.measure, a.measure)
    if r is None:
        return None
    k = ten_power(r)
    literal = None if a.literal is None or k is None else (a.literal[0] + k, a.literal[1])
    return g, Expr(a.value * r, a.has_decimal, literal, a.unit)


def _mixed_units(a: Listing) -> Expr | None:
    """`3 hours and 20 minutes`, `1 m, 20 cm`: one quantity in units of one kind, each strictly
    smaller than the one before, as their sum (in the first unit). Two values in the same unit
    (`5 m and 3 m`) are two answers, not a sum."""
    items = a.items
    if not 2 <= len(items) <= 4 or any(j not in (",", "and") for j in a.joiners):
        return None
    if not all(isinstance(x, Expr) and x.measure is not None and x.unit is None for x in items):
        return None
    first = items[0].measure
    if any(x.measure.dims != first.dims for x in items) or any(
        y.measure.factor >= x.measure.factor for x, y in zip(items, items[1:])
    ):
        return None
    total = sum((x.value * (x.measure.factor / first.factor) for x in items), sympy.Integer(0))
    return Expr(total, any(x.has_decimal for x in items), None, None, first)


def _symbol_measure(e: Expr) -> Expr:
    read = units.symbol_unit(e.value) if e.unit is None else None
    return e if read is None else Expr(read[0], e.has_decimal, None, None, read[1])


def _readings(g: Expr, a: Expr, o: MathOptions) -> list[tuple[tuple[sympy.Basic, int], tuple[sympy.Basic, int]]]:
    """The (gold, answer) value pairs that may be compared, each value with the shift of its last
    decimal place. Percent and degree marks:
    - the same mark on both sides: the numbers are compared (`25\\%` and `25\\%`);
    - a percent gold: the answer may drop the sign (`25`) or, under `percent="either"`, give the
      fraction (`0.25`), as `MathOptions.percent` states;
    - a percent answer for a gold without one means its value (`25\\%` is 0.25): right for gold
      `0.25` or `\\frac14`, wrong for gold `25`. A percent is not the bare number.
    - a degree gold: the answer may drop the mark (`30`) or give radians (`\\frac{\\pi}{6}`);
    - a degree answer for a gold without one: the same number (`90^\\circ` for `90`: the question
      asked in degrees), or, for a gold written with pi (a radian value: `\\frac{\\pi}{6}`), only the
      angle converted to radians (`\\frac{\\pi}{2}^\\circ` is not `\\frac{\\pi}{2}`);
    - a radian answer (`45 \\text{ radians}`) for a degree gold is converted to degrees (45 radians is
      not 45 degrees); gon are degrees times 9/10 (`grammar`), so 90 gon is not 90 degrees.
    A plain number gold (`3.14`, `0.524`) shows no sign of being an angle in radians, so `180^\\circ`
    is not `3.14`."""
    gold, answer = [(g.value, 0)], [(a.value, 0)]
    if g.unit == "percent" and a.unit != "percent":
        fraction = [(g.value / 100, -2)]
        gold = {"either": gold + fraction, "number": gold, "fraction": fraction}[o.percent]
    elif a.unit == "percent" and g.unit != "percent":
        answer = [(a.value / 100, -2)]
    if a.unit == "radian" and g.unit == "degree":  # 45 radians is not 45 degrees
        answer = [(a.value * 180 / sympy.pi, 0)] if o.angles == "either" else answer
    elif o.angles == "either" and g.unit == "degree" and a.unit != "degree":
        gold = gold + [(g.value * sympy.pi / 180, 0)]
    elif o.angles == "either" and a.unit == "degree" and g.unit != "degree" and g.value.has(sympy.pi):
        answer = [(a.value * sympy.pi / 180, 0)]  # a radian gold: (pi/2) degrees is not pi/2
    return [(x, y) for x in gold for y in answer]


def _same_as_expr(g: Expr, a: Node, o: MathOptions) -> bool:
    if isinstance(a, Expr):
        return exprs_equal(g, a, o)
    if isinstance(a, Relation) and a.ops == ("=",) and all(isinstance(p, Expr) for p in a.parts):
        # x = 3 for gold 3; 2 + 3 = 5 (a worked chain) for gold 5
        return (is_variable(a.parts[0]) or not a.parts[0].value.free_symbols) and exprs_equal(g, a.parts[1], o)
    if isinstance(a, Text):  # \text{e} (read as a letter) for Euler's number e
        return g.value.is_Symbol and g.value.name.lower() == a.text or g.value == sympy.E and a.text == "e"
    if isinstance(a, BaseNumber):  # 101_2 is 5
        return g.value.is_Integer and a.value() == g.value
    if isinstance(a, Matrix) and len(a.rows) == 1 and len(a.rows[0]) == 1:
        return exprs_equal(g, a.rows[0][0], o)
    return False


# -- equations and inequalities
def _same_relation(g: Relation, a: Node, o: MathOptions) -> bool:
    if is_assignment(g):
        var, rhs = g.parts
        if isinstance(a, Relation) and is_assignment(a):
            return a.parts[0].value == var.value and same(rhs, a.parts[1], o)
        if not isinstance(a, Relation):
            return same(rhs, a, o)
    if not isinstance(a, Relation) or len(g.parts) != 2 or len(a.parts) != 2:
        return False
    if not all(isinstance(p, Expr) for p in g.parts + a.parts):
        return False
    gf, af = _difference(g), _difference(a)
    if g.ops == ("=",) and a.ops == ("=",):
        return proportional(gf[0], af[0])
    if gf[1] != af[1] or g.ops[0] not in INEQUALITIES or a.ops[0] not in INEQUALITIES:
        return False
    return proportional(gf[0], af[0], positive=True)


def _difference(rel: Relation) -> tuple[sympy.Basic, str]:
    """`l op r` as `f op' 0` with op' in (=, >, >=)."""
    lhs, rhs = (p.value for p in rel.parts)
    op = rel.ops[0]
    if op in ("<", "<="):
        return rhs - lhs, {"<": ">", "<=": ">="}[op]
    return lhs - rhs, op


# -- intervals and sets
def sets_equal(g: intervals.Pieces, a: intervals.Pieces, g_literals: tuple, a_literals: tuple, o: MathOptions) -> bool:
    """Same pieces: the same brackets and equal endpoints; an endpoint written as a decimal
    literal (in `*_literals`) follows the decimal rules like a number on its own."""
    if len(g) != len(a):
        return False
    g_lits, a_lits = dict(g_literals), dict(a_literals)
    for (glo, ghi, gl, gr), (alo, ahi, al, ar) in zip(g, a):
        if (gl, gr) != (al, ar):
            return False
        for x, y in ((glo, alo), (ghi, ahi)):
            if x != y and not exprs_equal(_endpoint(x, g_lits), _endpoint(y, a_lits), o):
                return False
    return True


def _endpoint(x: sympy.Basic, lits: dict) -> Expr:
    literal = lits.get(x)
    return Expr(x, literal is not None, literal)


# -- tuples, lists, sets
def _values(node: Node) -> list[Node]:
    """The answers a collection holds, assignments read as their values."""
    items = node.items if isinstance(node, (SetOf, Listing, Bracket)) else (node,)
    return [x.parts[1] if is_assignment(x) else x for x in items]


def _same_bracket(g: Bracket, a: Node, o: MathOptions) -> bool:
    if len(g.items) == 2 and (g.open, g.close) != ("(", ")") and isinstance(a, Listing):
        return False  # [1, 2] is an interval (a closed bracket says so), not the two numbers 1, 2
    if len(g.items) == 2:
        gs, as_ = to_set(g), to_set(a)
        if gs is not None and as_ is not None and (isinstance(a, SetExpr) or (g.open, g.close) != (a.open, a.close)):
            return sets_equal(gs, as_, literals(g), literals(a), o)
    if isinstance(a, Matrix) and (len(a.rows) == 1 or all(len(r) == 1 for r in a.rows)):
        a = Bracket(tuple(c for r in a.rows for c in r), "(", ")")
    if isinstance(a, Listing) and all(is_assignment(x) for x in a.items) and all(is_assignment(x) for x in g.items):
        return _same_mapping(g.items, a.items, o)
    if not isinstance(a, (Bracket, Listing)) or len(_values(a)) != len(g.items):
        return False
    return all(same(x, y, o) for x, y in zip(_values(g), _values(a)))


def _same_mapping(g_items, a_items, o: MathOptions) -> bool:
    gmap = {x.parts[0].value: x.parts[1] for x in g_items}
    amap = {x.parts[0].value: x.parts[1] for x in a_items}
    return gmap.keys() == amap.keys() and all(same(gmap[k], amap[k], o) for k in gmap)


def _same_collection(g: SetOf | Listing, a: Node, o: MathOptions) -> bool:
    names = [x.parts[0].value for x in g.items if is_assignment(x)]
    if len(names) == len(g.items) and len(set(names)) == len(names) and not _indexed(names):  # x = 1, y = 2: a point
        if isinstance(a, (Listing, SetOf)) and all(is_assignment(x) for x in a.items):
            return _same_mapping(g.items, a.items, o)
        return isinstance(a, (Bracket, Listing)) and _same_bracket(Bracket(g.items, "(", ")"), a, o)
    if isinstance(a, Matrix):
        return False
    if isinstance(a, Bracket) and (isinstance(g, SetOf) or len(a.items) == 2 and (a.open, a.close) != ("(", ")")):
        # (1, 2) and [1, 2] are a pair and an interval, not the finite set {1, 2}; for a plain list
        # gold (1, 2) may be its values in order, [1, 2) or [1, 2] only an interval
        return False
    gold_values, answer_values = _values(g), _values(a)
    if max(len(gold_values), len(answer_values)) > MAX_MATCH:  # pairwise matching is quadratic
        return set(gold_values) == set(answer_values)
    gold_values, answer_values = _distinct(gold_values, o), _distinct(answer_values, o)
    if len(gold_values) != len(answer_values):
        return False
    unused = list(answer_values)
    for x in gold_values:
        match = next((y for y in unused if same(x, y, o)), None)
        if match is None:
            return False
        unused.remove(match)
    return True


def _indexed(names: list) -> bool:
    """x_1 = 1, x_2 = 2 names the roots of one unknown: a set of values, not a point."""
    bases = {str(n).split("_")[0] for n in names if "_" in str(n)}
    return len(bases) == 1 and all("_" in str(n) for n in names)


def _distinct(values: list[Node], o: MathOptions) -> list[Node]:
    out: list[Node] = []
    for v in values:
        if not any(v == w or same(w, v, o) for w in out):
            out.append(v)
    return out


def _same_matrix(g: Matrix, a: Node, o: MathOptions) -> bool:
    if isinstance(a, Matrix):
        if len(a.rows) != len(g.rows) or any(len(x) != len(y) for x, y in zip(a.rows, g.rows)):
            return False
        return all(exprs_equal(x, y, o) for gr, ar in zip(g.rows, a.rows) for x, y in zip(gr, ar))
    if isinstance(a, Bracket) and (len(g.rows) == 1 or all(len(r) == 1 for r in g.rows)):
        flat = [c for r in g.rows for c in r]
        return len(flat) == len(a.items) and all(same(x, y, o) for x, y in zip(flat, a.items))
    return False


def _same_text(g: Text, a: Node) -> bool:
    if isinstance(a, Text):
        return a.text == g.text
    if isinstance(a, Expr):
        return a.value.is_Symbol and a.value.name.lower() == g.text or a.value == sympy.E and g.text == "e"
    if isinstance(a, SetExpr):
        return _set_words(a.value, g.text)
    return False


def _set_words(value: intervals.Pieces, text: str) -> bool:
    # `parse` reads every phrase of `words.SPECIAL` as its canonical text
    return value == intervals.EMPTY and text == "no solution" or value == intervals.REALS and text == "all real numbers"
