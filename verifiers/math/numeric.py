"""Equality of two SymPy values.

Exact wherever the gold is exact: rationals compare as rationals (`1/2^{99}` is not `1/2^{98}`),
other constants (roots, pi) by 40-digit evaluation, where equal algebraic/transcendental
expressions agree to every digit and different ones essentially never agree to 25.
Tolerant only for a decimal gold: relative `rel_tol`, or rounding to the gold's last digit.
Expressions with variables are compared at pseudo-random points (fixed seed: deterministic).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import mpmath
import sympy

PREC = 40
EXACT_REL = mpmath.mpf("1e-25")
POINTS = 4


@dataclass(frozen=True)
class Tolerance:
    """How close an answer must be: `None` fields mean exact comparison."""

    rel_tol: float | None = None
    half_ulp: float | None = None  # answer may round to the gold: |a - g| < half a unit of its last digit


def approx(expr: sympy.Basic, subs: dict | None = None) -> mpmath.mpc | None:
    """A 40-digit complex value, or None where the expression is not a finite number."""
    try:
        value = expr.evalf(PREC, subs=subs) if subs else expr.evalf(PREC)
        if value.free_symbols or value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            return None
        re, im = value.as_real_imag()
        if not (re.is_Number and im.is_Number):
            return None
        with mpmath.workdps(PREC):
            return mpmath.mpc(mpmath.mpf(sympy.Float(re, PREC)._mpf_), mpmath.mpf(sympy.Float(im, PREC)._mpf_))
    except (ArithmeticError, TypeError, ValueError, AttributeError, RecursionError):
        return None


def _close(g: mpmath.mpc, a: mpmath.mpc, tol: Tolerance) -> bool:
    with mpmath.workdps(PREC):
        err = abs(g - a)
        if tol.half_ulp is not None and err < tol.half_ulp:
            return True
        if tol.rel_tol is not None:
            return err <= tol.rel_tol * max(abs(g), mpmath.mpf(1) if g == 0 else abs(g))
        return err <= EXACT_REL * max(abs(g), 1)


def numbers_equal(g: sympy.Basic, a: sympy.Basic, tol: Tolerance) -> bool:
    """Two constants (no variables)."""
    if g == a:
        return True
    if g.is_Rational and a.is_Rational and tol.rel_tol is None:
        return False
    if not (g.is_finite is not False and a.is_finite is not False):
        return False  # infinities equal only structurally (checked above)
    gv, av = approx(g), approx(a)
    if gv is None or av is None:
        return False
    return _close(gv, av, tol)


def functions_equal(g: sympy.Basic, a: sympy.Basic, tol: Tolerance) -> bool:
    """Two expressions in the same variables, compared at several points."""
    if g == a:
        return True
    # Points range over the variables of both: sin^2 x + cos^2 x equals 1, 2x + 1 is not 2t + 1.
    # No expand/simplify: their cost is unbounded ((x+1)^{1000}); 40-digit point values are not.
    return _agree_at_points(g, a, lambda gv, av: _close(gv, av, Tolerance(tol.rel_tol)))


def _points(symbols: list[sympy.Symbol], count: int) -> list[dict]:
    rng = random.Random(20240611)
    out = []
    for _ in range(count):
        out.append({s: sympy.Float(rng.choice((-1, 1)) * rng.uniform(0.15, 3.7), PREC) for s in symbols})
    return out


def _agree_at_points(g: sympy.Basic, a: sympy.Basic, same) -> bool:
    symbols = sorted(g.free_symbols | a.free_symbols, key=lambda s: s.name)
    agreed = 0
    for point in _points(symbols, 2 * POINTS):
        gv, av = approx(g, point), approx(a, point)
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
    ratio = None
    agreed = 0
    for point in _points(symbols, 2 * POINTS):
        fv, hv = approx(f, point), approx(h, point)
        if fv is None or hv is None:
            continue
        with mpmath.workdps(PREC):
            if abs(hv) < EXACT_REL or abs(fv) < EXACT_REL:
                if abs(hv) < EXACT_REL and abs(fv) < EXACT_REL:
                    continue
                return False
            r = fv / hv
            if ratio is None:
                ratio = r
            elif abs(r - ratio) > EXACT_REL * 1e5 * max(1, abs(ratio)):
                return False
        agreed += 1
        if agreed >= POINTS:
            break
    if ratio is None or agreed < 2:
        return False
    if positive:
        return abs(ratio.imag) < EXACT_REL and ratio.real > 0
    return True
