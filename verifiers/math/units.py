"""Units of measure written after an answer (`5 \\text{ m}`, `500 cm`, `3.5 hours`, `80 km/h`).

Rules (see `equivalence.exprs_equal`, which applies them):

1. Both sides carry a known unit: they must measure the same kind of quantity (length, area,
   time, speed...), else the answer is wrong (`5 km` for `5 kg`). Of the same kind, the answer is
   converted exactly into the gold's unit and compared under the numeric policy of `decimals`
   (`500 cm` and `0.005 km` are `5 m`; `5 km` is not `5 m`; `1.524 m` is `5 ft`). A decimal stays
   one decimal literal through a power-of-ten conversion (`0.3333 km` for `\\frac{1000}{3} m`).
2. One side only carries a unit: the numbers are compared as written (`5` for `5 m`, and `5 m`
   for `5`): the question usually names the unit ("in metres"), and a unit the gold lacks cannot
   be checked. A `5 km` for a gold `5` whose question wanted metres is accepted: no verifier can
   see that from the gold alone.
3. Words that are not units here (`apples`, `square units`, `people`) are ignored, as before.
4. Refused (never converted): units whose size is ambiguous or not a fixed ratio: a year, a month
   (only to each other: 12 months are a year, but a year is no fixed number of days), a `ton`
   (short, long or metric), temperature scales (an offset, not a ratio; the scale letter is
   dropped by `normalize`), currencies other than dollars and cents. Such a unit equals only
   itself, so `365 days` for `1 year` is judged wrong.
5. A unit under an exponent that is not a small integer (`cm^{999}`, `m^{x}`) is unreadable and
   matches no gold unit (`UNREADABLE`); against a gold without a unit rule 2 applies.
6. A single-letter unit symbol outside `\\text{}` (`5m`, `5\\mathrm{m}`) reads as a variable; it
   is read as the unit only when the other side carries a unit (`symbol_unit`).

The table is this module's own (exact rational factors: 1 in = 2.54 cm, 1 lb = 0.45359237 kg);
`sympy.physics.units` is larger but slow to import and holds no words (`kilometres`, `mph`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

R = sympy.Rational


@dataclass(frozen=True)
class Unit:
    """A unit as powers of base quantities (`dims`, sorted) and its size in base units."""

    dims: tuple[tuple[str, int], ...]
    factor: sympy.Rational


def _u(dims: dict[str, int], factor) -> Unit:
    return Unit(tuple(sorted(dims.items())), sympy.Rational(factor))


_M, _G, _S, _Y, _USD = {"m": 1}, {"g": 1}, {"s": 1}, {"year": 1}, {"usd": 1}
_SPEED = {"m": 1, "s": -1}
_MILE = R(1609344, 1000)


def _names(names: str, unit: Unit) -> dict[str, Unit]:
    return {n: unit for n in names.split()}


TABLE: dict[str, Unit] = {
    **_names("m meter meters metre metres", _u(_M, 1)),
    **_names("km kilometer kilometers kilometre kilometres", _u(_M, 1000)),
    **_names("cm centimeter centimeters centimetre centimetres", _u(_M, R(1, 100))),
    **_names("mm millimeter millimeters millimetre millimetres", _u(_M, R(1, 1000))),
    **_names("inch inches", _u(_M, R(254, 10000))),
    **_names("ft foot feet", _u(_M, R(3048, 10000))),
    **_names("yd yard yards", _u(_M, R(9144, 10000))),
    **_names("mi mile miles", _u(_M, _MILE)),
    **_names("g gram grams gramme grammes", _u(_G, 1)),
    **_names("kg kilogram kilograms kilogramme kilogrammes kilo kilos", _u(_G, 1000)),
    **_names("mg milligram milligrams", _u(_G, R(1, 1000))),
    **_names("tonne tonnes", _u(_G, 10**6)),
    **_names("lb lbs pound pounds", _u(_G, R(45359237, 100000))),
    **_names("oz ounce ounces", _u(_G, R(45359237, 1600000))),
    **_names("s sec secs second seconds", _u(_S, 1)),
    **_names("min mins minute minutes", _u(_S, 60)),
    **_names("h hr hrs hour hours", _u(_S, 3600)),
    **_names("day days", _u(_S, 86400)),
    **_names("week weeks", _u(_S, 604800)),
    **_names("year years yr yrs", _u(_Y, 1)),
    **_names("month months", _u(_Y, R(1, 12))),
    **_names("l liter liters litre litres", _u({"m": 3}, R(1, 1000))),
    **_names("ml milliliter milliliters millilitre millilitres cc", _u({"m": 3}, R(1, 10**6))),
    **_names("hectare hectares", _u({"m": 2}, 10**4)),
    **_names("acre acres", _u({"m": 2}, R(40468564224, 10**7))),
    **_names("mph", _u(_SPEED, _MILE / 3600)),
    **_names("kph kmh", _u(_SPEED, R(1000, 3600))),
    **_names("ton tons", _u({"ton": 1}, 1)),
    **_names("dollar dollars usd", _u(_USD, 1)),
    **_names("cent cents", _u(_USD, R(1, 100))),
}
_SQUARE = {"square": 2, "sq": 2, "cubic": 3, "cu": 3}
UNREADABLE = Unit((("unreadable", 1),), sympy.Integer(1))  # cm^{999}: no gold's unit
SYMBOLS = {"m", "g", "s", "h", "l", "L"}  # unit symbols that outside \text{} read as variables
MAX_POWER = 4


def read(words: list[tuple[str, int]]) -> Unit | None:
    """The unit that words after a number name (each with the power written after it:
    `cm^2` is ("cm", 2)), or None if none of them is a unit. `square`/`cubic` raise the next unit
    to a power, `per` (also `/` inside `\\text{}`) divides by it; other words are fillers."""
    dims: dict[str, int] = {}
    factor = sympy.Integer(1)
    found, raise_to, sign = False, 1, 1
    for word, power in words:
        if word in _SQUARE:
            raise_to = _SQUARE[word]
            continue
        if word == "per":
            sign = -1
            continue
        unit = TABLE.get(word)
        if unit is None:
            raise_to = 1
            continue
        p = sign * raise_to * power
        if abs(p) > MAX_POWER:
            return UNREADABLE
        for d, k in unit.dims:
            dims[d] = dims.get(d, 0) + k * p
        factor *= unit.factor**p
        found, raise_to, sign = True, 1, 1
    if not found:
        return None
    return Unit(tuple(sorted((d, k) for d, k in dims.items() if k)), factor)


def ratio(gold: Unit, answer: Unit) -> sympy.Rational | None:
    """What one `answer` unit is in `gold` units, or None if they measure different things."""
    if gold.dims != answer.dims:
        return None
    return answer.factor / gold.factor


def symbol_unit(value: sympy.Basic) -> tuple[sympy.Basic, Unit] | None:
    """`5m`, `5\\mathrm{m}`: a number times one unit symbol, as (number, unit); else None."""
    if value.is_Symbol:
        coefficient, symbol = sympy.Integer(1), value
    elif value.is_Mul and len(value.free_symbols) == 1:
        symbol = next(iter(value.free_symbols))
        coefficient = value / symbol
        if coefficient.free_symbols:
            return None
    else:
        return None
    if symbol.name not in SYMBOLS or not coefficient.is_number:
        return None
    return coefficient, TABLE[symbol.name.lower()]
