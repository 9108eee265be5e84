"""Exact equality of two SymPy values (the rounding rules for decimals are in `decimals`).

Rationals compare as rationals (`1/2^{99}` is not `1/2^{98}`; a decimal is the rational it
writes). A rational never equals a number SymPy knows to be irrational (`3.14159...` with any
number of digits is not `\\pi`). Other constants (roots, pi) compare by evaluation to 40 digits
(more when a long rational is involved), where equal algebraic/transcendental expressions agree
to every digit and different ones essentially never agree to 25 (that agreement decides that two
exact expressions are one number; it never admits a decimal). Expressions with variables are
compared at pseudo-random points (fixed seed: deterministic).
"""
from __future__ import annotations

import random

import mpmath
import sympy

PREC = 40
EXACT_REL = mpmath.mpf("1e-25")
POINTS = 4
MAX_PREC = 31_000  # evaluation digits: past the longest rational kept (build.MAX_BITS, ~30,100 digits)


def approx(expr: sympy.Basic, subs: dict | None = None, prec: int = PREC) -> mpmath.mpc | None:
    """A `prec`-digit complex value, or None where the expression is not a finite number."""
    try:
        value = expr.evalf(prec, subs=subs) if subs else expr.evalf(prec)
        if value.free_symbols or value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            return None
        re, im = value.as_real_imag()
        if not (re.is_Number and im.is_Number):
            return None
        with mpmath.workdps(prec):
            return mpmath.mpc(mpmath.mpf(sympy.Float(re, prec)._mpf_), mpmath.mpf(sympy.Float(im, prec)._mpf_))
    except (ArithmeticError, TypeError, ValueError, AttributeError, RecursionError):
        return None


def int_digits(n: int) -> int:
    """Decimal digits of |n|, at most one too many (no str(): Python refuses it past 4,300 digits)."""
    return int(abs(n).bit_length() * 0.30103) + 1


def _digits(x: sympy.Basic) -> int:
    return max(int_digits(int(x.p)), int_digits(int(x.q))) if x.is_Rational else 0


def precision(*exprs: sympy.Basic) -> int:
    """Digits to evaluate at so that a long decimal inside (`0.3333333333333333333333333333x`)
    cannot pass for an exact value (`x/3`): 40 past the longest rational written."""
    longest = max((_digits(r) for e in exprs for r in e.atoms(sympy.Rational)), default=0)
    return min(PREC + longest, MAX_PREC)


def _rel(prec: int) -> mpmath.mpf:
    """The relative difference below which two `prec`-digit values are the same number."""
    return EXACT_REL * mpmath.mpf(10) ** (PREC - prec)


def numbers_equal(g: sympy.Basic, a: sympy.Basic) -> bool:
    """Two constants (no variables), exactly."""
    if g == a:
        return True
    if g.is_Rational and a.is_Rational:
        return False
    if not (g.is_finite is not False and a.is_finite is not False):
        return False  # infinities equal only structurally (checked above)
    if g.is_Rational or a.is_Rational:
        other = a if g.is_Rational else g
        if other.is_rational is False:  # SymPy proves it irrational: no rational equals it
            return False
    # A long rational agrees with an irrational to many digits (3.14159265358979323846264338...):
    # evaluate past its length so that only a true equality agrees to every digit.
    prec = precision(g, a)
    if prec >= MAX_PREC:
        return False  # cannot be told apart from a near neighbour: never call it equal
    gv, av = approx(g, prec=prec), approx(a, prec=prec)
    if gv is None or av is None:
        return False
    with mpmath.workdps(prec):
        return abs(gv - av) <= _rel(prec) * max(abs(gv), 1)


def functions_equal(g: sympy.Basic, a: sympy.Basic) -> bool:
    """Two expressions in the same variables, compared at several points."""
    if g == a:
        return True
    # Points range over the variables of both: sin^2 x + cos^2 x equals 1, 2x + 1 is not 2t + 1.
    # No expand/simplify: their cost is unbounded ((x+1)^{1000}); 40-digit point values are not.
    prec = precision(g, a)

    def close(gv: mpmath.mpc, av: mpmath.mpc) -> bool:
        with mpmath.workdps(prec):
            return abs(gv - av) <= _rel(prec) * max(abs(gv), 1)

    return _agree_at_points(g, a, close, prec)


def _points(symbols: list[sympy.Symbol], count: int) -> list[dict]:
    rng = random.Random(20240611)
    out = []
    for _ in range(count):
        out.append({s: sympy.Float(rng.choice((-1, 1)) * rng.uniform(0.15, 3.7), PREC) for s in symbols})
    return out


def _agree_at_points(g: sympy.Basic, a: sympy.Basic, same, prec: int) -> bool:
    symbols = sorted(g.free_symbols | a.free_symbols, key=lambda s: s.name)
    agreed = 0
    for point in _points(symbols, 2 * POINTS):
        gv, av = approx(g, point, prec), approx(a, point, prec)
        if gv is None and av is None:
            continue
        if gv is None or av is None or not same(gv, av):
            return False
        agreed += 1
        if agreed >= POINTS:
            break
    return agreed >= 2


def proportional(f: sympy.Basic, h: sympy.Basic, positive: bool = False) -> bool:
    """Whether f = c*h for a constant c != 0 (c > 0 if `positive`): equations and inequalities
    that are the same condition written differently (`2x + 2y = 2` and `x + y = 1`)."""
    if f.free_symbols != h.free_symbols or not f.free_symbols:
        return False
    symbols = sorted(f.free_symbols, key=lambda s: s.name)
    prec = precision(f, h)
    tiny = _rel(prec)
    ratio = None
    agreed = 0
    for point in _points(symbols, 2 * POINTS):
        fv, hv = approx(f, point, prec), approx(h, point, prec)
        if fv is None or hv is None:
            continue
        with mpmath.workdps(prec):
            if abs(hv) < tiny or abs(fv) < tiny:
                if abs(hv) < tiny and abs(fv) < tiny:
                    continue
                return False
            r = fv / hv
            if ratio is None:
                ratio = r
            elif abs(r - ratio) > tiny * 1e5 * max(1, abs(ratio)):
                return False
        agreed += 1
        if agreed >= POINTS:
            break
    if ratio is None or agreed < 2:
        return False
    if positive:
        return abs(ratio.imag) < tiny and ratio.real > 0
    return True
