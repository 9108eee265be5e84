"""Reading an answer string: clean it, recognise the forms that are not formulas (a number in
a base, a multiple-choice letter, words, a ratio), and parse the rest with `grammar.Parser`.

Rules (issue #27):
- `strict` (a model's answer): every word must be in a closed class of `words` (grammar 2.0,
  `final_answer`); so a value after "not", "except", "at least", "a multiple of" (`\\text{not } 5`,
  `anything except 9`) is no answer, with no list of such phrases. A leading `\\ne` is a `Denied`.
- A ratio `a:b` of two constants is the number a/b (`11:21` is `\\frac{11}{21}`; `2:4` is `1:2`,
  the same ratio); a ratio of two names (`A:B`, `V_1:V_2`) is their quotient, so a label
  `A:B` reads as one; a ratio mixing the two (`1:30 pm`) is no ratio (it stays text).
- `split_label`: `|AB| = 1`, `\\frac{NO}{BO} = \\frac{1}{\\sqrt6}`, `V_1:V_2 = 11:21` name the
  quantity on the left (a label: letters, subscripts, bars, fractions and colons only, no
  digits or operators; or a function at constants, `f(2) = 7`; or commands naming a variable
  quantity, `\\tan\\alpha = 2`) and state its value on the right. The judge compares the values; two
  labels must agree when both sides have one. A plain variable (`x = 3`) is not split here: the
  equivalence rules compare assignments by their names.
- A number glued to a word (`COVID19`, `AZYUK2A`: two or more letters, then a digit) is part of
  that word: the answer is unreadable, never the number (LaTeX commands such as `\\sqrt2` aside).
- `thousands=False` reads `1,234` as the two items 1 and 234 (the judge's reading when the gold
  is a list); by default it is the number 1234.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.grammar import Parser
from rlvr.verifiers.math.lexer import FUNCTIONS, SHORT_WORDS, ParseError, tokenize
from rlvr.verifiers.math.nodes import BaseNumber, Expr, Node, Relation, Text
from rlvr.verifiers.math.normalize import clean
from rlvr.verifiers.math.text import is_digit
from rlvr.verifiers.math.words import SPECIAL_TEXT, spelled_number

_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|emph|textsf|texttt|hbox)\s*\{([^{}]*)\}")
_BASE = re.compile(r"\(?([0-9A-Za-z]+)\)?_\{?\(?(\d{1,2})\)?\}?")
_WORDS = re.compile(r"[A-Za-z][A-Za-z .,'()/-]*")
_CHOICE = re.compile(r"\(([A-Za-z])\)")
_SHORT_PROSE = SHORT_WORDS | {"odd", "nor"}
_MATH_WORDS = {"sqrt", "pi", "sin", "cos", "tan", "log", "ln", "exp", "inf", "infty", "infinity", "oo"}
_SUBSCRIPT = re.compile(r"_\{?\w{1,4}\}?")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_GLUED_WORD = re.compile(r"(?<![A-Za-z\\])[A-Za-z]{2,}\d")  # COVID19, AZYUK2A: not a number
_EVALUATED = re.compile(r"[A-Za-z](?:_\{?\w{1,4}\}?)?\(\s?-?[\d.,/ ]{1,20}\)")  # f(2), g_1(0.5): a value named
_PLAIN_NAME = re.compile(r"[A-Za-z](?:_\{?\w{1,4}\}?)?(?:\([A-Za-z]\))?")
_OPEN, _CLOSE = "{([", "})]"


class Denied(ParseError):
    """The answer negates or qualifies a value (`not 5`, `a multiple of 12`): it states no answer."""


def parse_answer(answer: str, thousands: bool = True, strict: bool = False) -> Node:
    """The node an answer string denotes; ParseError (or TooLarge) if it cannot be read. `strict`
    for a model's answer: every word must be in a closed class of `words` (see `grammar.Parser`)."""
    s = clean(answer, thousands)
    if not s:
        raise ParseError("empty answer")
    bare = _TEXT_CMD.sub(lambda m: m.group(1), s).strip()
    special = SPECIAL_TEXT.get(normal_text(bare))
    if special is not None:  # "does not exist", "no solution": a phrase with a fixed meaning
        return Text(special)
    if bare.startswith(("\\ne", "\u2260", "!=")):
        raise Denied(f"the answer denies a value: {bare[:60]!r}")
    base = _BASE.fullmatch(bare)
    if base and int(base.group(2)) >= 2 and _base_digits(base.group(1), int(base.group(2))):
        return BaseNumber(base.group(1).upper(), int(base.group(2)))
    glued = _GLUED_WORD.search(_COMMAND.sub(" ", bare))
    if glued and glued.group(0)[:-1].lower() not in FUNCTIONS:  # `sin2x` is sin(2x)
        raise ParseError(f"a number glued to a word: {bare[:60]!r}")
    choice = _CHOICE.fullmatch(bare)
    if choice or len(bare) == 1 and bare.isalpha() and bare != s:  # (B), \text{B}: a multiple-choice letter
        return Text(bare.strip("()").lower())
    if _WORDS.fullmatch(bare) and _is_prose(bare, plain=bare == s):
        words = normal_text(bare.replace("-", " ")).split()
        spelled = spelled_number(words)
        if spelled is not None:  # "twenty-five", "twelve marbles": the rest is read as after a number
            rest = " ".join(words[spelled[1] :])
            return Parser(tokenize(f"{spelled[0]} \\text{{{rest}}}" if rest else str(spelled[0])), strict).answer()
        return Text(normal_text(bare))
    if ":" in s:
        ratio = _ratio(s, strict)
        if ratio is not None:
            return ratio
    return Parser(tokenize(s), strict).answer()


def _top_level(s: str, chars: str) -> list[int]:
    """Indexes of `chars` outside any bracket or brace (a linear scan)."""
    out, depth, i = [], 0, 0
    while i < len(s):
        ch = s[i]
        if ch == "\\":
            i += 2
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and ch in chars:
            out.append(i)
        i += 1
    return out


def _plain_equals(s: str, k: int) -> bool:
    """`=` at `k` is an equals sign, not part of `<=`, `>=`, `!=`, `:=`, `==`."""
    return not (k > 0 and s[k - 1] in "<>!:") and s[k + 1 : k + 2] != "="


def _pieces(s: str, cuts: list[int]) -> list[str]:
    bounds = [-1] + cuts + [len(s)]
    return [s[a + 1 : b].strip() for a, b in zip(bounds, bounds[1:])]


def _ratio(s: str, strict: bool = False) -> Node | None:
    """`a:b` (or `L = a:b`, `A:B = 1`) with its ratios read as quotients; None if no ratio applies."""
    equals = _top_level(s, "=")
    if any(not _plain_equals(s, k) for k in equals) or len(equals) > 2:
        return None
    sides = []
    for side in _pieces(s, equals):
        cuts = _top_level(side, ":")
        if not cuts:
            node = Parser(tokenize(side), strict).answer() if side else None
            if not isinstance(node, Expr):
                return None
            sides.append(node)
            continue
        if len(cuts) > 1:
            return None
        parts = [Parser(tokenize(p), strict).answer() if p else None for p in _pieces(side, cuts)]
        if not all(isinstance(p, Expr) and p.unit is None for p in parts):
            return None
        constant = [not p.value.free_symbols for p in parts]
        if constant[0] != constant[1] or parts[1].value == 0:
            return None  # "1:30 pm" is no ratio
        sides.append(Expr(parts[0].value / parts[1].value, parts[0].has_decimal or parts[1].has_decimal))
    if len(sides) == 1:
        return sides[0]
    return Relation(("=",) * (len(sides) - 1), tuple(sides))


def split_label(answer: str) -> tuple[str, str] | None:
    """(label, value) for `|AB| = 1`-like answers (see the module docstring), else None."""
    s = clean(answer)
    if _top_level(s, ",;") or "\\\\" in s:
        return None
    equals = [k for k in _top_level(s, "=") if _plain_equals(s, k)]
    if not equals:
        return None
    label, value = s[: equals[0]].strip(), s[equals[0] + 1 :].strip()
    return (label, value) if value and is_label(label) else None


def is_label(text: str) -> bool:
    """Letters naming a quantity (`|AB|`, `A:B`, `\\frac{NO}{BO}`, `V_1:V_2`, `\\angle ABC`,
    `\\tan\\alpha`), not a plain variable (`x`, `x_1`, `f(x)`), not a constant (`\\pi`) and not a
    formula (no digits outside subscripts, no operators)."""
    if not text or _PLAIN_NAME.fullmatch(text):
        return False
    if _EVALUATED.fullmatch(text):
        return True
    rest = _COMMAND.sub(" ", _SUBSCRIPT.sub(" ", text))
    if not all(ch.isalpha() or ch in "{}|:() '" for ch in rest):
        return False
    if any(ch.isalpha() for ch in rest):
        return True
    try:  # commands only (`\\tan\\alpha`): a label if it names something variable
        node = Parser(tokenize(text)).answer()
    except (ParseError, RecursionError):
        return False
    return isinstance(node, Expr) and bool(node.value.free_symbols)


def _base_digits(digits: str, base: int) -> bool:
    """`204_5`, `FF_{16}`: digits of a base; letters alone only as upper-case digits of a base
    above ten, two or more of them (`A_{12}` and `x_{16}` are subscripted variables)."""
    if any(is_digit(ch) for ch in digits):
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


__all__ = ["Denied", "ParseError", "is_label", "normal_text", "parse_answer", "split_label"]
