"""String clean-up of an answer before it is tokenised: LaTeX spacing and sizing commands, a
`\\boxed` left inside the answer, unicode symbols, thousands separators, degree and percent marks.
Pure string functions.

Thousands separators: `10,455`, `10{,}455`, `10\\,455`, `10\\ 455` and `10 455` are the number
10455 (groups of exactly three digits, the first of one to three digits not starting with 0), as
real final answers write them; `(10, 455)` (a comma and a space, or brackets) stays a tuple and
`1,2` a list. When the gold is a list the judge reads `1,234` with `thousands=False`: two items.
A dollar sign before an amount is the unit dollars (`\\$0.20` is `0.20 \\text{ dollars}`, 20 cents).
Every pattern here is linear: no nested or adjacent overlapping quantifiers (each run is anchored
by a look-behind, so a long digit or space run is scanned once)."""

from __future__ import annotations

import re

_UNICODE = {
    "\u2212": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u00d7": "\\times ",
    "\u22c5": "\\cdot ",
    "\u00b7": "\\cdot ",
    "\u00f7": "\\div ",
    "\u221a": "\\sqrt ",
    "\u03c0": "\\pi ",
    "\u221e": "\\infty ",
    "\u2264": "\\le ",
    "\u2265": "\\ge ",
    "\u2260": "\\ne ",
    "\u00b0": "\\degree ",
    "\u00b2": "^2",
    "\u00b3": "^3",
    "\u222a": "\\cup ",
    "\u2229": "\\cap ",
    "\u211d": "\\mathbb{R}",
    "\u00b1": "\\pm ",
    "\u2009": "\\,",
    "\u202f": "\\,",
    "\u00a0": " ",
    "\u2208": "\\in ",
    "\u2205": "\\emptyset ",
    "\u2248": "\\approx ",
    "\u03b8": "\\theta ",
}
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))
_DROP = re.compile(
    r"\\(?:left|right)\.|\\(?:left|right|[bB]igg?[lr]?|displaystyle|textstyle|scriptstyle|limits|nolimits|"
    r"q?quad|hfill|mathop|boxed|fbox)(?![A-Za-z])|(?<!\\)\\![ ]*|(?<!\\)\\[;:>]|\$|(?<!\\)\\[()\[\]]"
)
_SPACE = re.compile(r"(?<!\\)\\ |~|(?<!\\)\\,(?!\d)")
_FRAC = re.compile(r"\\[dtc]frac(?![A-Za-z])")
_BINOM = re.compile(r"\\[dt]binom(?![A-Za-z])")
_DEGREE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\circ(?![A-Za-z])|\^\s*\{\s*\\degree\s*\}")
_CELSIUS = re.compile(r"(\\degree\s*)(?:\\(?:text|mathrm)\s*\{\s*[CF]\s*\}|[CF](?![A-Za-z]))")
_THIN_THOUSANDS = re.compile(r"(?<=\d)(?:\\,|\{,\}|\\ )(?=\d{3}(?!\d))")
_DECIMAL_COMMA = re.compile(r"(?<=\d)\{,\}(?=\d)")
_COMMA_THOUSANDS = re.compile(r"(?<![\d.,])[1-9]\d{0,2}(?:,\d{3})+(?!\d|,\d)")
# 7 425 000: groups of exactly three digits after a space; not after a decimal point or in an
# exponent (x^2 100), not before `/` (the mixed number 3 500/999)
_SPACE_THOUSANDS = re.compile(r"(?<![\w.^])[1-9]\d{0,2}(?: \d{3})+(?![\d/])")
_DOLLARS = re.compile(r"\\\$\s?(-?\d[\d,]*(?:\.\d+)?)")
_PLAIN_INTEGER = re.compile(r"[-+]?[0-9]+")
_REPEATING = re.compile(r"(?<!\d)(\d*)\.(\d*)\\overline\{(\d{1,20})\}")
_TIMES_X = re.compile(r"(?<=\d)\s*[xX]\s*(?=10\^)")
_DEGREE_O = re.compile(r"(?<=\d)\s*\^\s*(?:\{\s*o\s*\}|o)(?![A-Za-z])")


def _repeating(m: re.Match) -> str:
    """0.1\\overline{6} is 1/6: the exact fraction of a repeating decimal."""
    whole, fixed, cycle = m.group(1) or "0", m.group(2), m.group(3)
    num = int(whole + fixed + cycle) - int(whole + fixed)
    den = (10 ** len(cycle) - 1) * 10 ** len(fixed)
    return f"\\frac{{{num}}}{{{den}}}"


def clean(answer: str, thousands: bool = True) -> str:
    """`answer` with presentation-only LaTeX removed and number formatting made plain; with
    `thousands=False` a comma between digits stays a separator of items (`1,234` is 1 and 234)."""
    if _PLAIN_INTEGER.fullmatch(answer):  # the most common answer, which no rule below changes
        return answer
    s = _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], answer)
    s = _DOLLARS.sub(r"\1 \\text{ dollars}", s)  # \$20 is 20 dollars: a unit the judge compares (20 cents is not)
    s = s.replace("\\$", " ").replace("\\#", " ")
    s = _DROP.sub("", s)
    s = _REPEATING.sub(_repeating, s)
    s = _TIMES_X.sub(r" \\times ", s)
    s = _DEGREE_O.sub(r" \\degree ", s)
    s = _THIN_THOUSANDS.sub("", s)
    s = _DECIMAL_COMMA.sub(".", s)
    s = _SPACE.sub(" ", s)
    s = _FRAC.sub(r"\\frac", s)
    s = _BINOM.sub(r"\\binom", s)
    s = _DEGREE.sub(r" \\degree ", s)
    s = _CELSIUS.sub(r"\1", s)  # 25^\circ C: the temperature scale is a unit
    s = s.replace("\\%", "%")
    if thousands:
        s = _COMMA_THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)
    s = _SPACE_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), s).strip()
    while s.endswith((".", ",", ";")):
        s = s[:-1].rstrip()
    return s


def squash(answer: str) -> str:
    """A cheap canonical string for exact-match fast paths: cleaned, without whitespace."""
    return "".join(clean(answer).split())
