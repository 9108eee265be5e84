"""rlvr.verifiers.math on any text (issue 38): no string a model can write makes `verify` return
`error` (which training and pass@k leave out, so a policy could take an answer it is unsure of
out of its reward) or run past its deadline. Every Unicode general category, every character
that Unicode calls a digit, random LaTeX fragments and 100,000-character inputs, seeded so that
a failure repeats. Real SymPy in real worker processes."""

from __future__ import annotations

import random
import sys
import time
import unicodedata
from collections import defaultdict

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math import MathOptions
from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.parse import parse_answer
from rlvr.verifiers.math.text import plain
from rlvr.verifiers.verdict import Outcome, Verdict

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module

DEADLINE_S = MathOptions().timeout_s + 0.7  # the call's own bound plus scheduling on a loaded 2-core machine
CONTEXTS = ("\\boxed{{{}}}", "\\boxed{{1{}2}}", "The answer is {}.", "Answer: 5{}", "\\boxed{{\\text{{{}}}}}", "$x{}$")


def _by_category() -> dict[str, list[str]]:
    chars: dict[str, list[str]] = defaultdict(list)
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        chars[unicodedata.category(ch)].append(ch)
    return chars


CATEGORIES = _by_category()
# every character that str.isdigit/isnumeric accepts: the class that crashed int() (①, ⑴, ⒈, ₅, 𐩀)
NUMERIC = [ch for chars in CATEGORIES.values() for ch in chars if ch.isnumeric() and not ch.isascii()]


def checked(response: str, gold: str = "5") -> Verdict:
    start = time.monotonic()
    verdict = vm.verify(response, gold)
    took = time.monotonic() - start
    assert verdict.outcome is not Outcome.ERROR, (response[:80], verdict.detail)
    assert took < DEADLINE_S, (response[:80], took)
    return verdict


def test_no_numeric_character_breaks_the_reader():
    """The reader raises nothing but its own ParseError on any numeric character, in any place."""
    assert len(NUMERIC) > 1000
    for ch in NUMERIC:
        for form in ("{}", "1{}", "{}2", "\\frac{{{}}}{{2}}", "x^{}", "{} apples"):
            try:
                parse_answer(plain(form.format(ch)), strict=True)
            except ParseError:
                pass


def test_numeric_characters_are_never_an_error_and_read_as_their_digit():
    rng = random.Random(38)
    for ch in rng.sample(NUMERIC, 120) + list("①⑴⒈₅⁵𐩀٣४"):
        for context in CONTEXTS[:4]:
            checked(context.format(ch))
    assert vm.verify("\\boxed{①}", "1").outcome is Outcome.CORRECT  # NFKC: a circled 1 is 1
    assert vm.verify("The answer is ٤٢.", "42").outcome is Outcome.CORRECT  # Arabic-Indic digits
    assert vm.verify("\\boxed{𐩀}", "1").outcome is Outcome.INCORRECT  # no decimal digit: a symbol


def test_every_unicode_category_in_every_context():
    rng = random.Random(380)
    for category, chars in sorted(CATEGORIES.items()):
        if category == "Cs":  # lone surrogates cannot be in a str that came from text
            continue
        for ch in chars[:2] + rng.sample(chars, min(3, len(chars))):
            for context in CONTEXTS:
                checked(context.format(ch))


FRAGMENTS = [
    "\\frac{",
    "}",
    "{",
    "\\sqrt",
    "^",
    "_",
    "\\boxed{",
    "\\text{",
    "$",
    "\\(",
    "\\)",
    "\\left(",
    "\\right)",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "+",
    "-",
    "*",
    "/",
    "!",
    "%",
    "\\%",
    "\\pi",
    "\\infty",
    "\\circ",
    "\\cdot",
    "1",
    "0",
    "9",
    ".",
    "2.5",
    "x",
    "y",
    "n",
    " ",
    "\\\\",
    "&",
    "\\begin{pmatrix}",
    "\\end{pmatrix}",
    "\\{",
    "\\}",
    "or",
    "not",
    "the answer is ",
    "Answer:",
    "thousand",
    "apples",
    "radians",
    "?",
    "✗",
    "<answer>",
    "</answer>",
    "\u200b",
    "½",
    "²",
    "−",
    "①",
    "\\overline{",
    "e",
    "i",
    "\\le",
    "\\cup",
    "|",
    "\\mathbb{R}",
    "\n",
]


def test_random_latex_fragments():
    rng = random.Random(3838)
    for _ in range(400):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 40)))
        checked(text, rng.choice(["5", "\\frac{1}{2}", "x^2+1", "(1,2)", "[0,1)", "\\text{no solution}"]))


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: "".join(chr(rng.randint(0x20, 0x2FFFF)) for _ in range(100_000)).replace("\ud800", ""),
        lambda rng: "".join(rng.choice(FRAGMENTS) for _ in range(40_000))[:100_000],
        lambda rng: "\\boxed{" + "".join(rng.choice("0123456789+-*/^(){}") for _ in range(100_000)) + "}",
        lambda rng: "The answer is " + "①" * 100_000,
        lambda rng: "Answer: " + "\u200b" * 50_000 + "5" + " or maybe 6" * 5_000,
    ],
    ids=["random_unicode", "random_latex", "boxed_arithmetic", "circled_digits", "format_characters"],
)
def test_100k_character_inputs(make):
    text = make(random.Random(38_000))
    assert len(text) >= 100_000
    checked(text)
