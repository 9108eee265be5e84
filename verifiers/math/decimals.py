"""The numeric policy: when a number written with a decimal point equals another number.

There is no tolerance. A decimal is the exact rational it writes (`0.1` is 1/10), and:

1. Two decimals are equal only if they are equal as decimals: `3.140` = `3.14`, but
   `3.141` != `3.14`, `1234.5687` != `1234.5678`, `0.1234567` != `0.123456`.
2. A number with a finite decimal expansion (integers, `1/4`, `1/8`, `3/20`) equals only that
   expansion: `0.25` and `0.250` are `1/4`; `0.2500001` and `0.3` are not; `99.99` is not `100`.
3. A decimal answer equals an exact gold *without* a finite expansion (`1/3`, `\\sqrt{17}`,
   `2\\pi`, `e`) when it agrees with the gold to every digit it shows, rounded (half away from
   zero) or truncated (toward zero), and shows at least `MathOptions.min_answer_digits` (4)
   significant digits: for `\\pi`, `3.1416` and `3.1415` are right; `3.14` (3 digits), `3.1417`
   and `3.1461` are not; for `1/3`, `0.3333` is right and `0.333`, `0.33` are not.
4. The converse, for a decimal gold with at least `round_min_digits` (3) significant digits: an
   exact answer without a finite expansion that *rounds* (half away from zero) to the gold at
   the gold's last shown digit is right (gold `3.14` accepts `\\pi`, gold `0.333` accepts `1/3`,
   gold `0.667` accepts `2/3`): the gold's author rounded. Truncation is not accepted here: a
   gold states the interval its rounding covers (`12.5` is [12.45, 12.55)), and truncation
   would double it (`\\frac{88}{7}` = 12.571... is not `12.5`). The gold's trailing zeros are
   shown digits (`0.500` is [0.4995, 0.5005): `\\frac{500}{999}` = 0.5005... is not it).
   `round_to_gold=False` turns this off. An answer with a finite expansion is compared exactly
   (rule 2).
5. Inside tuples, sets, intervals and matrices each element follows rules 1-4 on its own
   (`(0.3333, 0.6667)` is `(1/3, 2/3)`; `[2.667, 5)` is `[8/3, 5)`).

Rules 3 and 4 relate a decimal written as one literal (`-0.3333`, `3.333\\times10^{-1}`,
`33.33\\%`) and an exact value written without any decimal point. A formula holding a decimal
(`0.5\\pi`, `\\sqrt{6.26}`) is neither: it is the exact number it writes (`0.5\\pi` is pi/2) and
is compared exactly only (rules 1 and 2): it is a computation on decimals, not the exact value a
gold was rounded from, so `\\sqrt{6.26}` = 2.50199... is not gold `2.50`.
"""

from __future__ import annotations

import mpmath
import sympy

from rlvr.verifiers.math.nodes import Expr
from rlvr.verifiers.math.numeric import MAX_PREC, PREC, approx, int_digits
from rlvr.verifiers.math.options import MathOptions

GUARD = 20  # extra digits when deciding a rounding: a value this close to a rounding boundary is treated as on it
EXTRA_PLACES = 30  # a value that terminates within this many more places than shown counts as finite


def rounded_equal(g: Expr, gv: sympy.Basic, gshift: int, a: Expr, av: sympy.Basic, ashift: int, o: MathOptions) -> bool:
    """Rules 3 and 4 for one reading of each side (`shift` moves the last decimal place of a
    percent read as a fraction). Exact equality (rules 1 and 2) is checked by the caller."""
    if a.literal is not None and g.literal is None and a.literal[1] >= o.min_answer_digits:
        return approximates(av, a.literal[0] + ashift, gv)
    if g.literal is not None and not a.has_decimal and o.round_to_gold and g.literal[1] >= o.round_min_digits:
        return approximates(gv, g.literal[0] + gshift, av, truncated=False)
    return False


def finite_expansion(x: sympy.Rational) -> bool:
    q = int(x.q)
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1


def approximates(shown: sympy.Basic, place: int, exact: sympy.Basic, truncated: bool = True) -> bool:
    """Whether the decimal `shown`, whose last digit is in place 10**place, is `exact` rounded or
    (if `truncated`) truncated at that place, `exact` being a real number without a finite
    decimal expansion."""
    if not shown.is_Rational or exact.free_symbols:
        return False
    scale = sympy.Integer(10) ** (-place) if place <= 0 else sympy.Rational(1, 10**place)
    n = shown * scale
    if not n.is_Integer:
        return False
    if exact.is_Rational:
        if finite_expansion(exact):
            return False
        s = exact * scale
        low = sympy.floor(s)
        frac = s - low
        half = sympy.Rational(1, 2)
        return int(n) in _candidates(int(low), frac > 0, frac < half, frac == half, truncated)
    return _approximates_number(int(n), place, exact, truncated)


def _approximates_number(n: int, place: int, exact: sympy.Basic, truncated: bool) -> bool:
    """`approximates` for an irrational or unevaluated `exact`, decided numerically."""
    rough = approx(exact)
    if rough is None or rough.imag != 0 and abs(rough.imag) > mpmath.mpf(10) ** (-PREC + 5) * abs(rough):
        return False
    with mpmath.workdps(PREC):
        # cheap rejection before any high-precision work: `shown` must be within one unit of its last place
        if abs(rough.real - n * mpmath.mpf(10) ** place) > 2 * mpmath.mpf(10) ** place + abs(rough.real) * mpmath.mpf(
            10
        ) ** (5 - PREC):
            return False
    digits = int_digits(n) + EXTRA_PLACES + 2 * GUARD
    if digits > MAX_PREC:
        return False
    value = approx(exact, prec=digits)
    if value is None:
        return False
    with mpmath.workdps(digits):
        x = value.real
        if _on_grid(x * mpmath.mpf(10) ** (EXTRA_PLACES - place)):
            return False  # numerically a finite decimal (e.g. an unsimplified 1/1024): rule 2 applies
        s = x * mpmath.mpf(10) ** (-place)
        low = int(mpmath.floor(s))
        frac = s - low
        eps = mpmath.mpf(10) ** (-GUARD)
        half = mpmath.mpf(0.5)
        return n in _candidates(low, frac > eps, frac < half - eps, abs(frac - half) <= eps, truncated)


def _on_grid(s: mpmath.mpf) -> bool:
    return abs(s - mpmath.nint(s)) <= mpmath.mpf(10) ** (-GUARD)


def _candidates(low: int, above_low: bool, below_half: bool, at_half: bool, truncated: bool = True) -> set[int]:
    """The integers that `low + frac` (0 <= frac < 1, the exact value scaled to its last shown
    place) rounds or (if `truncated`) truncates to. A value exactly on the grid (frac == 0) is not
    an approximation."""
    if not above_low:
        return set()
    if at_half:
        rounded = {low + 1} if low >= 0 else {low}  # half away from zero
    else:
        rounded = {low} if below_half else {low + 1}
    return (rounded | {low if low >= 0 else low + 1}) if truncated else rounded  # truncation: toward zero
