"""Exact equality of two SymPy values (the rounding rules for decimals are in `decimals`).

Rationals compare as rationals (`1/2^{99}` is not `1/2^{98}`; a decimal is the rational it
writes). A rational never equals a number SymPy knows to be irrational (`3.14159...` with any
number of digits is not `\\pi`). Other constants (roots, pi) compare by evaluation to 40 digits
(more when a long rational is involved), where equal algebraic/transcendental expressions agree
to every digit and different ones essentially never agree to 25 (that agreement decides that two
exact expressions are one number; it never admits a decimal). Before any evaluation, a
difference that SymPy's automatic simplification leaves as one nonzero term (`differ_by_a_term`)
decides "different": `1 + e^{-100}` agrees with 1 to 43 digits but is not 1.

Expressions with variables (`functions_equal`) are compared at pseudo-random points (fixed seed:
deterministic), and a point where they differ always decides "different". The points span
magnitudes (`BANDS`): |x| in [0.15, 3.7] as before, and also up to 40, 2,000 and 10^6, because a
step or a slowly growing term can hide on small points alone (`\\lceil x^2/14 \\rceil` is 1 for
|x| < 3.74, `x^2 + \\lfloor x^2/100 \\rfloor` is x^2 for |x| < 10, `x^2 + (x/100)^{20}` agrees
with x^2 to 30 digits there). Wide bands are skipped where evaluation would explode
(`_widest_band`: nested exponentials, a sine of an exponential). At the larger bands values are
computed strictly (SymPy raises rather than return digits it could not make accurate) and a
point where either side does not evaluate is skipped, not counted as a difference (a
cancellation may exhaust the precision there); at least two small points must agree.

Agreement at points is trusted only for analytic expressions (polynomials, roots, exp, log,
trigonometric functions), whose differences cannot vanish on every random point unless they are
identical. An expression holding a step or kink (`\\lfloor\\rfloor`, `\\lceil\\rceil`, `|.|`,
sign, max, min, mod) can equal the gold wherever it is sampled and differ beyond (`x^2 +
\\lfloor x^2/10^{40} \\rfloor`), so it is equal only when SymPy proves the difference zero with
the variables real (`\\sqrt{x^2}` is `|x|`; `x \\operatorname{sign} x` is `|x|`), by automatic
evaluation, expansion or, for a difference of at most `MAX_PROOF_OPS` operations, `simplify`.
"""

from __future__ import annotations

import random

import mpmath
import sympy

PREC = 40
EXACT_REL = mpmath.mpf("1e-25")
POINTS = 4
MAX_PREC = 31_000  # evaluation digits: past the longest rational kept (build.MAX_BITS, ~30,100 digits)


def approx(expr: sympy.Basic, subs: dict | None = None, prec: int = PREC, strict: bool = False) -> mpmath.mpc | None:
    """A `prec`-digit complex value, or None where the expression is not a finite number (or,
    if `strict`, where SymPy cannot reach full accuracy within its working precision)."""
    try:
        value = expr.evalf(prec, subs=subs, strict=strict) if subs else expr.evalf(prec, strict=strict)
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
    if differ_by_a_term(g, a):
        return False
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


def differ_by_a_term(g: sympy.Basic, a: sympy.Basic) -> bool:
    """Whether g - a, as SymPy forms it (cancelling equal terms, no simplification), is one term
    that SymPy knows is not zero: `e^x + e^{-1000}` is not `e^x`, although the two agree to
    400 digits everywhere. A term without sums only: zero tests of sums can take a second."""
    try:
        d = g - a
        return d != 0 and not d.has(sympy.Add) and d.is_zero is False
    except (ArithmeticError, TypeError, ValueError, AttributeError, RecursionError):
        return False


def functions_equal(g: sympy.Basic, a: sympy.Basic) -> bool:
    """Two expressions in the same variables, compared at several points."""
    if g == a:
        return True
    if differ_by_a_term(g, a):
        return False
    # Points range over the variables of both: sin^2 x + cos^2 x equals 1, 2x + 1 is not 2t + 1.
    # No expand/simplify: their cost is unbounded ((x+1)^{1000}); 40-digit point values are not.
    prec = precision(g, a)

    def close(gv: mpmath.mpc, av: mpmath.mpc) -> bool:
        with mpmath.workdps(prec):
            return abs(gv - av) <= _rel(prec) * max(abs(gv), 1)

    return _agree_at_points(g, a, close, prec)


def _points(symbols: list[sympy.Symbol], count: int, band: int = 0, rng: random.Random | None = None) -> list[dict]:
    """`count` points; at `band` > 0 each variable takes a magnitude from a band up to `band`."""
    rng = rng or random.Random(20240611)
    out = []
    for _ in range(count):
        point = {}
        for s in symbols:
            lo, hi = BANDS[rng.randint(1, band) if band else 0]
            point[s] = sympy.Float(rng.choice((-1, 1)) * rng.uniform(lo, hi), PREC)
        out.append(point)
    return out


BANDS = ((0.15, 3.7), (3.7, 40.0), (40.0, 2000.0), (1e4, 1e6))
WIDE_POINTS = 2  # points drawn at each wider band
MAX_PROOF_OPS = 40
MAX_PROOF_POWER = 12
_PERIODIC = (sympy.sin, sympy.cos, sympy.tan, sympy.cot, sympy.sec, sympy.csc)
# functions with a step or a kink: agreement at points is no evidence of equality (module docstring)
NON_ANALYTIC = (
    sympy.floor,
    sympy.ceiling,
    sympy.Abs,
    sympy.sign,
    sympy.Max,
    sympy.Min,
    sympy.Mod,
    sympy.frac,
    sympy.Piecewise,
    sympy.Heaviside,
    sympy.re,
    sympy.im,
    sympy.arg,
)


def _growth(expr: sympy.Basic, depth: int = 0) -> int:
    """The deepest nesting of exponentials with a variable exponent (e^{e^x} is 2)."""
    if not expr.args or depth > 8:
        return 0
    own = 1 if (isinstance(expr, sympy.exp) or expr.is_Pow and expr.exp.free_symbols) and expr.free_symbols else 0
    return own + max(_growth(arg, depth + 1) for arg in expr.args)


def _widest_band(*exprs: sympy.Basic) -> int:
    """The widest band at which evaluation stays cheap and accurate. An exponential's value must
    be known to every digit of its size before a sine of it (sin(e^x) at 10^6 needs pi to
    434,000 digits: 26 s), and e^{e^x} at 2,000 needs e^x to 868 digits. So: every band without
    exponentials of a variable, up to 2,000 with one level (e^x, x^x), small points with two;
    a periodic function of an exponential up to 40 (e^{40} has 18 digits)."""
    band = len(BANDS) - 1
    for e in exprs:
        band = min(band, (len(BANDS) - 1, 2)[_growth(e)] if _growth(e) < 2 else 0)
        for t in e.atoms(*_PERIODIC):
            if _growth(t.args[0]):
                band = min(band, 1 if _growth(t.args[0]) == 1 else 0)
    return band


def _agree_at_points(g: sympy.Basic, a: sympy.Basic, same, prec: int) -> bool:
    symbols = sorted(g.free_symbols | a.free_symbols, key=lambda s: s.name)
    agreed = 0
    rng = random.Random(20240611)
    for point in _points(symbols, 2 * POINTS, rng=rng):
        gv, av = approx(g, point, prec), approx(a, point, prec)
        if gv is None and av is None:
            continue
        if gv is None or av is None or not same(gv, av):
            return False
        agreed += 1
        if agreed >= POINTS:
            break
    if agreed < 2:
        return False
    for band in range(1, _widest_band(g, a) + 1):
        for point in _points(symbols, WIDE_POINTS, band, rng):
            gv, av = approx(g, point, prec, strict=True), approx(a, point, prec, strict=True)
            if gv is not None and av is not None and not same(gv, av):
                return False
    if g.has(*NON_ANALYTIC) or a.has(*NON_ANALYTIC):
        return proved_equal(g, a)
    return True


def proved_equal(g: sympy.Basic, a: sympy.Basic) -> bool:
    """Whether SymPy shows g - a = 0 for real values of the variables (bounded: `simplify` only
    on a small difference)."""
    real = {s: sympy.Dummy(s.name, real=True) for s in g.free_symbols | a.free_symbols}
    try:
        d = g.xreplace(real) - a.xreplace(real)
        if d == 0:
            return True
        # expand and simplify cost grows fast with size and powers ((x+1)^{1000}): small ones only
        powers = (abs(p.exp) for p in d.atoms(sympy.Pow) if p.exp.is_Rational)
        if sympy.count_ops(d) > MAX_PROOF_OPS or any(p > MAX_PROOF_POWER for p in powers):
            return False
        return sympy.expand(d) == 0 or sympy.simplify(d) == 0
    except (ArithmeticError, TypeError, ValueError, AttributeError, RecursionError, NotImplementedError):
        return False


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
    rng = random.Random(20240611)
    small = _points(symbols, 2 * POINTS, rng=rng)
    wide = [p for band in range(1, _widest_band(f, h) + 1) for p in _points(symbols, WIDE_POINTS, band, rng)]
    for k, point in enumerate(small + wide):
        if k >= len(small) and (ratio is None or agreed < 2):
            return False
        if agreed >= POINTS and k < len(small):
            continue
        fv, hv = approx(f, point, prec, strict=k >= len(small)), approx(h, point, prec, strict=k >= len(small))
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
    if ratio is None or agreed < 2:
        return False
    if positive:
        return abs(ratio.imag) < tiny and ratio.real > 0
    return True
