"""The response and the gold as plain text, before any answer is looked for: one linear pass.

A model's text may hold any Unicode character, so this is where every way of writing a digit,
a minus or a fraction becomes one way, and where invisible characters go:
- superscript and subscript runs become `^{...}` and `_{...}` (`x²` is `x^{2}`, `a₁` is `a_{1}`),
  vulgar fractions a `\\frac` (`½` is `\\frac{1}{2}`; `3½` is `3\\frac{1}{2}`, a mixed number), the
  blackboard letters their commands (`ℝ` is `\\mathbb{R}`): NFKC would flatten all of these into
  plain digits and letters (`x²` into `x2`), so they go first;
- then NFKC: full-width, circled, parenthesised and stopped digits (`４２`, `①`, `⑴`, `⒈`) and
  presentation forms become plain characters;
- format characters (Unicode category Cf: zero-width spaces and joiners, bidi marks, the soft
  hyphen) are removed: `10\u200b000` is `10000`;
- every dash that reads as a minus (`‐ ‑ ‒ − ﹣ －`) is `-`, the fraction slash `⁄` is `/`;
- a decimal digit of any script (category Nd: `٣`, `३`) is its ASCII digit.
Afterwards the digits are exactly `0`-`9`. Any other character that Unicode calls numeric
(`𐩀`) is a symbol like any other: never a digit, so never a crash of `int()`.
"""

from __future__ import annotations

import re
import unicodedata

_SUPER = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni", strict=True))
_SUB = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎", "0123456789+-=()", strict=True))
_SCRIPT_RUN = re.compile(f"[{''.join(_SUPER)}]+|[{''.join(_SUB)}]+")
_VULGAR = re.compile(r"(\d?)([\u00bc-\u00be\u2150-\u215e\u2189])")
_LETTERS = {"ℝ": "\\mathbb{R}", "ℕ": "\\mathbb{N}", "ℤ": "\\mathbb{Z}", "ℚ": "\\mathbb{Q}", "ℂ": "\\mathbb{C}"}
_LETTER_RE = re.compile("|".join(_LETTERS))
_MINUS = str.maketrans({ch: "-" for ch in "\u2010\u2011\u2012\u2212\ufe63\uff0d"} | {"\u2044": "/"})
_ASCII = frozenset("0123456789")


def _script(m: re.Match) -> str:
    run = m.group(0)
    if run[0] in _SUPER:
        return "^{" + "".join(_SUPER[c] for c in run) + "}"
    return "_{" + "".join(_SUB[c] for c in run) + "}"


def _vulgar(m: re.Match) -> str:
    # NFKC writes ½ as 1⁄2; after a digit it is a mixed number (3½), as `3\frac{1}{2}` reads
    num, _, den = unicodedata.normalize("NFKC", m.group(2)).partition("\u2044")
    return f"{m.group(1)}\\frac{{{num}}}{{{den or 1}}}"


def _plain_char(ch: str) -> str:
    if ch in _ASCII or ch.isascii():
        return ch
    category = unicodedata.category(ch)
    if category == "Cf":
        return ""
    if category == "Nd":
        return str(unicodedata.decimal(ch))
    return ch


def plain(text: str) -> str:
    """`text` with one way of writing each digit, minus and fraction (see the module docstring)."""
    if text.isascii():
        return text  # the common case: nothing to do
    s = _SCRIPT_RUN.sub(_script, text)
    s = _VULGAR.sub(_vulgar, s)
    s = _LETTER_RE.sub(lambda m: _LETTERS[m.group(0)], s)
    s = unicodedata.normalize("NFKC", s).translate(_MINUS)
    return "".join(_plain_char(ch) for ch in s)


def has_value(s: str) -> bool:
    """Whether `s` holds a value to read: a digit, a math delimiter or a command."""
    return any(is_digit(ch) for ch in s) or "$" in s or "\\" in s


def is_digit(ch: str) -> bool:
    """An ASCII digit: the only digits the answer grammar reads (`str.isdigit` accepts `①`)."""
    return ch in _ASCII


__all__ = ["has_value", "is_digit", "plain"]
