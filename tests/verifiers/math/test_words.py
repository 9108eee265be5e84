"""The closed word classes of the final-answer grammar (verifiers/math/words.py) and the plain text
every answer is read from (verifiers/math/text.py), on worked strings; each class once through
`verify` too. Real SymPy in real worker processes."""

from __future__ import annotations

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.parse import parse_answer
from rlvr.verifiers.math.text import plain
from rlvr.verifiers.math.words import (
    APPROXIMATE,
    FILLERS,
    HEDGES,
    MULTIPLIERS,
    OPERATIVE,
    RETRACTIONS,
    SPECIAL_TEXT,
    spelled_number,
)
from rlvr.verifiers.verdict import Outcome

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


@pytest.mark.parametrize(
    ("words", "value", "used"),
    [
        ("zero", 0, 1),
        ("twelve marbles", 12, 1),
        ("twenty five", 25, 2),
        ("forty two apples", 42, 2),
        ("one hundred", 100, 2),
        ("three hundred and five", 305, 4),
        ("ten thousand", 10_000, 2),
        ("one million two hundred thousand", 1_200_000, 5),
        ("five six", 5, 1),  # two numbers, not one
        ("twenty thirty", 20, 1),
    ],
)
def test_spelled_numbers(words, value, used):
    assert spelled_number(words.split()) == (value, used)


def test_what_is_no_spelled_number():
    assert spelled_number(["hundred"]) is None and spelled_number(["and", "five"]) is None
    assert spelled_number([]) is None


def test_the_classes_do_not_overlap_where_it_would_matter():
    # a filler or multiplier that were also operative would be read two ways
    assert not (FILLERS - {"the", "a", "an", "answer", "is", "total", "all", "each", "in"}) & OPERATIVE
    assert not set(MULTIPLIERS) & OPERATIVE
    assert APPROXIMATE <= OPERATIVE  # never a counted noun: "5 approximately" is no answer
    assert "not" in OPERATIVE and "or" in OPERATIVE and "factorial" in OPERATIVE and "half" in OPERATIVE
    assert SPECIAL_TEXT["does not exist"] == "dne" and SPECIAL_TEXT["empty set"] == "no solution"
    assert "on reflection" in RETRACTIONS and "is also possible" in HEDGES


@pytest.mark.parametrize(
    ("text", "plain_text"),
    [
        ("x²+1", "x^{2}+1"),
        ("a₁₀", "a_{10}"),
        ("½", "\\frac{1}{2}"),
        ("3½", "3\\frac{1}{2}"),
        ("−½", "-\\frac{1}{2}"),
        ("1⁄2", "1/2"),
        ("10\u200b000", "10000"),
        ("‐5", "-5"),
        ("①", "1"),
        ("⑴", "(1)"),
        ("４２", "42"),
        ("٤٢", "42"),
        ("ℝ", "\\mathbb{R}"),
        ("π/2", "π/2"),  # kept: the reader knows π
        ("𐩀", "𐩀"),  # numeric to Unicode, no decimal digit: a symbol, never a digit
        ("plain ASCII", "plain ASCII"),
    ],
)
def test_plain_text(text, plain_text):
    assert plain(text) == plain_text


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("\\boxed{5 \\text{ thousand}}", "5000"),
        ("\\boxed{2 \\text{ dozen}}", "24"),
        ("\\boxed{\\$5\\text{k}}", "5000"),
        ("\\boxed{1.5\\text{ million}}", "1500000"),
        ("The answer is twenty-five.", "25"),
        ("**Answer:** twelve marbles", "12"),
        ("\\boxed{12 \\text{ apples}}", "12"),
        ("\\boxed{\\text{the answer is } 7}", "7"),
        ("\\boxed{\\text{does not exist}}", "\\text{DNE}"),
        ("Answer: no solution", "\\text{no solution}"),
        ("\\boxed{\\text{all real numbers}}", "(-\\infty, \\infty)"),
        ("\\boxed{\\frac{\\pi}{6} \\text{ rad}}", "\\frac{\\pi}{6}"),
        ("The answer is approximately 0.67.", "0.67"),
    ],
)
def test_words_of_the_classes_are_read(answer, gold):
    assert vm.verify(answer, gold).outcome is Outcome.CORRECT, vm.verify(answer, gold).detail


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("\\boxed{5 \\text{ is the wrong answer}}", "5"),
        ("\\boxed{\\text{minus } 5}", "5"),
        ("\\boxed{\\text{half of } 10}", "10"),
        ("\\boxed{5 \\text{ factorial}}", "5"),
        ("\\boxed{\\text{probably } 8}", "8"),
        ("\\boxed{12 \\text{ is what I would guess}}", "12"),
        ("\\boxed{3 \\text{ hours or so}}", "3"),
        ("\\boxed{5 \\text{ thousand}}", "5"),  # a multiplier is applied, never dropped
        ("The answer is approximately 3.14.", "\\pi"),  # approximate, for an exact gold
        ("\\boxed{90 \\text{ radians}}", "90^\\circ"),
        ("\\boxed{90\\text{ gon}}", "90^\\circ"),
        ("\\boxed{\\frac{\\pi}{2}^\\circ}", "\\frac{\\pi}{2}"),
    ],
)
def test_any_other_word_makes_the_region_no_answer(answer, gold):
    verdict = vm.verify(answer, gold)
    assert verdict.outcome is Outcome.INCORRECT, verdict.detail


def test_a_counted_noun_follows_a_number_only():
    with pytest.raises(ParseError):
        parse_answer("2x \\text{ apples}", strict=True)  # after an expression in x: no count
    with pytest.raises(ParseError):
        parse_answer("5 \\text{ red shiny apples}", strict=True)  # three words: a clause, not a noun
    parse_answer("5 \\text{ red apples}", strict=True)
    parse_answer("2x \\text{ apples}")  # a gold's words are trusted
