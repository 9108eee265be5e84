"""Reading an answer string: clean it, recognise the forms that are not formulas (a number in
a base, a multiple-choice letter, words), and parse the rest with `grammar.Parser`."""
from __future__ import annotations

import re

import sympy

from verifiers.math.grammar import Parser
from verifiers.math.lexer import SHORT_WORDS, ParseError, tokenize
from verifiers.math.nodes import BaseNumber, Expr, Node, Text
from verifiers.math.normalize import clean

_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|emph|textsf|texttt|hbox)\s*\{([^{}]*)\}")
_BASE = re.compile(r"\(?([0-9A-Za-z]+)\)?_\{?\(?(\d{1,2})\)?\}?")
_WORDS = re.compile(r"[A-Za-z][A-Za-z .,'()/-]*")
_CHOICE = re.compile(r"\(([A-Za-z])\)")
_NUMBER_WORDS = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_SHORT_PROSE = SHORT_WORDS | {"odd", "nor"}
_MATH_WORDS = {"sqrt", "pi", "sin", "cos", "tan", "log", "ln", "exp", "inf", "infty", "infinity", "oo"}


def parse_answer(answer: str) -> Node:
    """The node an answer string denotes; ParseError (or TooLarge) if it cannot be read."""
    s = clean(answer)
    if not s:
        raise ParseError("empty answer")
    bare = _TEXT_CMD.sub(lambda m: m.group(1), s).strip()
    base = _BASE.fullmatch(bare)
    if base and int(base.group(2)) >= 2 and _base_digits(base.group(1), int(base.group(2))):
        return BaseNumber(base.group(1).upper(), int(base.group(2)))
    choice = _CHOICE.fullmatch(bare)
    if choice or len(bare) == 1 and bare.isalpha() and bare != s:  # (B), \text{B}: a multiple-choice letter
        return Text(bare.strip("()").lower())
    if _WORDS.fullmatch(bare) and _is_prose(bare, plain=bare == s):
        text = normal_text(bare)
        if text in _NUMBER_WORDS:
            return Expr(sympy.Integer(_NUMBER_WORDS[text]))
        return Text(text)
    return Parser(tokenize(s)).answer()


def _base_digits(digits: str, base: int) -> bool:
    """`204_5`, `FF_{16}`: digits of a base; letters alone only as upper-case digits of a base
    above ten, two or more of them (`A_{12}` and `x_{16}` are subscripted variables)."""
    if any(ch.isdigit() for ch in digits):
        return True
    return base > 10 and len(digits) > 1 and digits.isupper() and all(int(ch, 36) < base for ch in digits)


def _is_prose(s: str, plain: bool) -> bool:
    """Whether `s` (letters and punctuation) is words. Outside `\\text{}` a lower-case run of up to
    three letters is a product of variables (`xy`, `yx`, `abc`), as the lexer reads it, unless
    it is a known short word (`no`, `yes`, `odd`); `Bob` is a name and `ACB` an ordering or a
    label of points, kept as words (`ACB` is not `ABC`)."""
    words = re.findall(r"[A-Za-z]+", s)
    if plain:
        return any(
            (len(w) > 3 or w.lower() in _SHORT_PROSE or len(w) == 3 and w.istitle() or len(w) > 1 and w.isupper())
            and w.lower() not in _MATH_WORDS
            for w in words
        )
    return any(len(w) > 1 and w.lower() not in _MATH_WORDS for w in words)


def normal_text(s: str) -> str:
    s = re.sub(r"[^a-z0-9 ]", " ", s.lower())
    words = [w for w in s.split() if w not in ("the", "a", "an")]
    return " ".join(words)


__all__ = ["parse_answer", "normal_text", "ParseError"]
