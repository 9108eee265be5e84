"""Guarded SymPy arithmetic for the parser: every operation checks sizes *before* SymPy computes,
so `10^{10^{10}}`, `(10^6)!` or the square root of a 10,000-digit number are refused in
microseconds instead of holding the GIL for minutes."""

from __future__ import annotations

from fractions import Fraction

import sympy

from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.nodes import Expr

MAX_BITS = 100_000  # largest exact rational kept (about 30,000 digits)
MAX_EXPONENT = 10_000  # largest integer power of a non-rational or symbolic base
MAX_ROOT_BITS = 512  # SymPy factors the radicand of a root: slow beyond this
MAX_FACTORIAL = 3_000
MAX_BINOMIAL = 20_000
MAX_SCI_EXPONENT = 10_000


class TooLarge(ParseError):
    """The answer denotes a number too large to compare exactly within the time bound."""


PM = sympy.Symbol("PLUSMINUS")  # `a \pm b` is a + PM*b; expanded into two answers later

FUNCTIONS = {
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "cot": sympy.cot,
    "sec": sympy.sec,
    "csc": sympy.csc,
    "arcsin": sympy.asin,
    "arccos": sympy.acos,
    "arctan": sympy.atan,
    "asin": sympy.asin,
    "acos": sympy.acos,
    "atan": sympy.atan,
    "arccot": sympy.acot,
    "arcsec": sympy.asec,
    "arccsc": sympy.acsc,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "tanh": sympy.tanh,
    "ln": sympy.log,
    "log": sympy.log,
    "exp": sympy.exp,
    "abs": sympy.Abs,
    "floor": sympy.floor,
    "ceil": sympy.ceiling,
}
_INVERSE = {"sin": "arcsin", "cos": "arccos", "tan": "arctan", "cot": "arccot", "sec": "arcsec", "csc": "arccsc"}


def _bits(value: sympy.Basic) -> int:
    if isinstance(value, sympy.Rational):
        return max(int(value.p).bit_length(), int(value.q).bit_length())
    return 0


def checked(value: sympy.Basic) -> sympy.Basic:
    if _bits(value) > MAX_BITS:
        raise TooLarge("number too large")
    return value


def plain(e: Expr) -> sympy.Expr:
    """The value of `e` as a pure number: a percent is /100 and degrees are radians inside formulas."""
    if e.unit == "percent":
        return e.value / 100
    if e.unit == "degree":
        return e.value * sympy.pi / 180
    return e.value


def number(text: str) -> Expr:
    """An exact number from `12`, `0.50`, `.5`, `1.2e5`; decimals remember their precision."""
    mantissa, _, exp_text = text.lower().partition("e")
    exponent = int(exp_text) if exp_text else 0
    if abs(exponent) > MAX_SCI_EXPONENT:
        raise TooLarge("exponent too large")
    whole, dot, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    value = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac)) * Fraction(10) ** exponent
    has_decimal = bool(dot and frac)
    literal = (exponent - len(frac), max(len(digits), 1)) if has_decimal else None
    return Expr(checked(sympy.Rational(value.numerator, value.denominator)), has_decimal, literal)


def combine(value: sympy.Basic, *parts: Expr) -> Expr:
    return Expr(checked(value), any(p.has_decimal for p in parts))


def add(a: Expr, b: Expr) -> Expr:
    return combine(plain(a) + plain(b), a, b)


def neg(a: Expr) -> Expr:
    return Expr(-a.value, a.has_decimal, a.literal, a.unit)


def mul(a: Expr, b: Expr) -> Expr:
    out = combine(plain(a) * plain(b), a, b)
    shift = ten_power(b.value) if a.literal and b.unit is None else None
    if shift is not None:
        # 1.2 \times 10^{5}, 3.333 \times 10^{-1}: still one decimal literal, its last digit moved
        out = Expr(out.value, True, (a.literal[0] + shift, a.literal[1]), a.unit)
    return out


def div(a: Expr, b: Expr) -> Expr:
    return combine(plain(a) / plain(b), a, b)


def ten_power(v: sympy.Basic) -> int | None:
    """k where v = 10^k for an integer k, else None (arithmetic, not str(): 10^{9999} is too long
    for Python's int-to-str limit)."""
    if not v.is_Rational or v <= 0 or not (v.p == 1 or v.q == 1):
        return None
    n = int(v.q if v.p == 1 else v.p)
    k = int(n.bit_length() * 0.30103)
    for e in (k - 1, k, k + 1):
        if e >= 0 and 10**e == n:
            return e if v.q == 1 else -e
    return None


def power(base: Expr, exp: Expr) -> Expr:
    b, e = plain(base), plain(exp)
    if b.has(PM) or e.has(PM):
        raise ParseError("\\pm inside a power")
    if e.is_Rational and not e.is_Integer and b.is_Rational and _bits(b) > MAX_ROOT_BITS:
        raise TooLarge("root of a very large number")
    if e.is_Rational and b.is_number and b not in (0, 1, -1, sympy.I, -sympy.I):
        whole = abs(int(e.p)) // int(e.q) + 1
        size = _bits(b) if b.is_Rational else 0
        if b.is_Rational and whole * size > MAX_BITS or not b.is_Rational and whole > MAX_EXPONENT:
            raise TooLarge("power too large")
    elif e.is_Rational and abs(int(e.p)) > MAX_EXPONENT and not b.is_number:
        raise TooLarge("exponent too large")
    elif not e.is_Rational and e.is_number and b.is_number:
        # a numeric exponent that is not rational (e.g. 2^{\sqrt 2}): bounded if it is moderate
        approx = sympy.Abs(e).evalf(15)
        if approx.is_comparable and approx > MAX_EXPONENT:
            raise TooLarge("exponent too large")
    return combine(sympy.Pow(b, e), base, exp)


def root(a: Expr, index: Expr | None = None) -> Expr:
    return power(a, Expr(sympy.Rational(1, 2)) if index is None else div(Expr(sympy.Integer(1)), index))


def factorial(a: Expr) -> Expr:
    v = plain(a)
    if v.is_Integer and v > MAX_FACTORIAL:
        raise TooLarge("factorial too large")
    return combine(sympy.factorial(v), a)


def binomial(n: Expr, k: Expr) -> Expr:
    nv, kv = plain(n), plain(k)
    if nv.is_Integer and abs(nv) > MAX_BINOMIAL:
        raise TooLarge("binomial too large")
    return combine(sympy.binomial(nv, kv), n, k)


def function(name: str, args: list[Expr], exponent: Expr | None = None, base: Expr | None = None) -> Expr:
    """`\\sin^2 x`, `\\sin^{-1} x`, `\\log_2 8`, `\\gcd(a, b)`, `\\max(a, b)`..."""
    if exponent is not None and exponent.value == -1 and name in _INVERSE:
        name, exponent = _INVERSE[name], None
    values = [plain(a) for a in args]
    if any(v.has(PM) for v in values):
        raise ParseError("\\pm inside a function")
    if name in ("gcd", "lcm", "max", "min"):
        if len(values) < 2 or any(v.is_Rational and _bits(v) > 4096 for v in values):
            raise ParseError(f"{name} needs two or more moderate arguments")
        op = {"gcd": sympy.gcd, "lcm": sympy.lcm, "max": sympy.Max, "min": sympy.Min}[name]
        value = op(*values) if name in ("max", "min") else _fold(op, values)
    elif name == "sqrt":
        return root(args[0]) if len(args) == 1 else _arity(name)
    elif len(values) != 1:
        return _arity(name)
    elif name == "log" and base is not None:
        value = sympy.log(values[0], plain(base))
    elif name == "lg":
        value = sympy.log(values[0], 10)
    elif name in FUNCTIONS:
        value = FUNCTIONS[name](values[0])
    else:
        raise ParseError(f"unsupported function {name}")
    out = combine(value, *args)
    return power(out, exponent) if exponent is not None else out


def _fold(op, values):
    acc = values[0]
    for v in values[1:]:
        acc = op(acc, v)
    return acc


def _arity(name: str) -> Expr:
    raise ParseError(f"wrong number of arguments to {name}")
