"""rlvr.verifiers.math: how an extracted answer is compared with the gold (issue #27). For each class,
wrong answers score 0 and right ones 1: units of measure (`units`), percent and degree marks
(`equivalence._readings`), an exact answer for a rounded decimal gold (`decimals`, rule 4), sets
against intervals, expressions compared over many magnitudes with a symbolic proof for steps
(`numeric`), inequalities against intervals (`canon`), plain-text constants. Real SymPy in real
worker processes, through `verifiers.math.verify`."""

from __future__ import annotations

import time

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math import units
from rlvr.verifiers.verdict import Outcome
from tests.verifiers.math.test_policy import check, is_correct  # one boxed-answer helper for both

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module
WORST_S = 2.0  # generous: a loaded machine; the worker's own deadline is 0.8 s


# -- units of measure
def test_units_of_another_size_or_kind_are_wrong():
    check(
        [
            ("5 \\text{ m}", "5 \\text{ km}", False),
            ("5 \\text{ m}", "5 \\text{ cm}", False),
            ("5 \\text{ m}", "5 \\text{ kg}", False),
            ("5 \\text{ m}", "5 \\text{ m/s}", False),
            ("18 \\text{ cm}^2", "18 \\text{ cm}", False),
            ("18 \\text{ cm}^2", "18 \\text{ cm}^3", False),
            ("9.81 \\text{ m/s}^2", "9.81 \\text{ m/s}", False),
            ("2 \\text{ hours}", "2 \\text{ minutes}", False),
            ("5 \\text{ m}", "50 \\text{ cm}", False),
            ("1.5 \\text{ km}", "150 \\text{ m}", False),
            ("5 \\text{ m}", "5 \\text{ ft}", False),
            ("3 \\text{ L}", "3 \\text{ mL}", False),
        ]
    )


def test_compatible_units_are_converted():
    check(
        [
            ("5 \\text{ m}", "500 \\text{ cm}", True),
            ("5 \\text{ m}", "0.005 \\text{ km}", True),
            ("5 \\text{ m}", "500cm", True),
            ("5 \\text{ m}", "5000 \\text{ millimeters}", True),
            ("1.5 \\text{ km}", "1500 \\text{ m}", True),
            ("1.5 \\text{ km}", "1.5 \\text{ kilometers}", True),
            ("5 \\text{ ft}", "1.524 \\text{ m}", True),
            ("5 \\text{ kg}", "5000 \\text{ g}", True),
            ("2 \\text{ hours}", "120 \\text{ minutes}", True),
            ("30 \\text{ minutes}", "0.5 \\text{ h}", True),
            ("10 \\text{ m/s}", "36 \\text{ km/h}", True),
            ("10 \\text{ m/s}", "36 \\text{ km per hour}", True),
            ("60 \\text{ mph}", "88 \\text{ ft/s}", True),
            ("3 \\text{ L}", "3000 \\text{ cm}^3", True),
            ("18 \\text{ cm}^2", "0.0018 \\text{ m}^2", True),
            ("5 \\text{ m}^2", "5 \\text{ square meters}", True),
            ("4\\pi \\text{ cm}^2", "400\\pi \\text{ mm}^2", True),
            ("12 \\text{ months}", "1 \\text{ year}", True),
            ("5 \\text{ m}", "d = 500 \\text{ cm}", True),
            ("5 \\mathrm{m}", "500 \\text{ cm}", True),
        ]
    )


def test_converted_units_keep_the_decimal_policy():
    check(
        [
            ("\\frac{1000}{3} \\text{ m}", "0.3333 \\text{ km}", True),
            ("\\frac{1000}{3} \\text{ m}", "0.333 \\text{ km}", False),
            ("4\\pi \\text{ cm}^2", "12.57 \\text{ cm}^2", True),
            ("4\\pi \\text{ cm}^2", "12.6 \\text{ cm}^2", False),
            ("5 \\text{ m}", "500.1 \\text{ cm}", False),
        ]
    )


def test_one_side_without_a_unit_compares_the_numbers():
    """The question names the unit; a unit only one side has cannot be checked (units, rule 2)."""
    check(
        [
            ("5 \\text{ m}", "5", True),
            ("5", "5 \\text{ m}", True),
            ("5 \\text{ m}", "500", False),
            ("5", "5 \\text{ apples}", True),
            ("9.81", "9.81 \\text{ m/s}^2", True),
        ]
    )


def test_mixed_units_are_one_quantity():
    check(
        [
            ("200 \\text{ minutes}", "3 \\text{ hours and } 20 \\text{ minutes}", True),
            ("1.2 \\text{ m}", "1 \\text{ m}, 20 \\text{ cm}", True),
            ("3 \\text{ hours}", "3 \\text{ hours and } 20 \\text{ minutes}", False),
            ("8 \\text{ m}", "5 \\text{ m and } 3 \\text{ m}", False),
            ("5 \\text{ m}", "5 \\text{ m and } 3 \\text{ m}", False),
            ("200", "3 \\text{ hours and } 20 \\text{ minutes}", False),
        ]
    )


def test_ambiguous_units_are_refused():
    check([("1 \\text{ year}", "365 \\text{ days}", False), ("2 \\text{ tons}", "4000 \\text{ pounds}", False)])


def test_units_read():
    m, cm = units.read([("m", 1)]), units.read([("cm", 1)])
    assert units.ratio(m, cm) == units.sympy.Rational(1, 100)
    assert units.ratio(m, units.read([("kg", 1)])) is None
    assert units.read([("km", 1), ("per", 1), ("h", 1)]) == units.read([("kph", 1)])
    assert units.read([("square", 1), ("feet", 1)]) == units.read([("ft", 2)])
    assert units.read([("apples", 1)]) is None and units.read([("m", 9)]) is units.UNREADABLE


# -- percent and degree marks
def test_a_percent_is_not_the_bare_number():
    check(
        [
            ("25", "25\\%", False),
            ("25", "25 \\text{ percent}", False),
            ("0.25", "25\\%", True),
            ("\\frac{1}{4}", "25\\%", True),
            ("25\\%", "25", True),
            ("25\\%", "0.25", True),
            ("25\\%", "25\\%", True),
            ("25\\%", "0.25\\%", False),
            ("25\\%", "2.5\\%", False),
            ("0.333", "33\\frac{1}{3}\\%", True),
        ]
    )


def test_degrees_convert_only_for_a_gold_in_radians():
    check(
        [
            ("3.14", "180^\\circ", False),
            ("0.524", "30^\\circ", False),
            ("3.1416", "180^\\circ", False),
            ("\\pi", "180^\\circ", True),
            ("\\frac{\\pi}{6}", "30^\\circ", True),
            ("\\frac{\\pi}{6}", "60^\\circ", False),
            ("90", "90^\\circ", True),
            ("30^\\circ", "30", True),
            ("30^\\circ", "\\frac{\\pi}{6}", True),
            ("30^\\circ", "\\frac{\\pi}{3}", False),
        ]
    )


# -- an exact answer for a rounded decimal gold
def test_exact_answer_must_round_to_every_shown_digit_of_the_gold():
    check(
        [
            ("12.5", "\\frac{88}{7}", False),
            ("2.50", "\\sqrt{6.26}", False),
            ("0.500", "\\frac{500}{999}", False),
            ("0.666", "\\frac{2}{3}", False),
            ("1.41", "\\sqrt{2.0}", False),
            ("1.571", "0.5\\pi", False),
            ("3.14", "\\pi", True),
            ("0.333", "\\frac{1}{3}", True),
            ("0.667", "\\frac{2}{3}", True),
            ("1.571", "\\frac{\\pi}{2}", True),
            ("2.50", "\\frac{5}{2}", True),
            ("0.500", "\\frac{1}{2}", True),
            ("-0.667", "-\\frac{2}{3}", True),
            ("12.6", "\\frac{88}{7}", True),
            ("\\frac{\\pi}{2}", "0.5\\pi", True),
        ]
    )


# -- sets and intervals
def test_sets_are_not_intervals_or_pairs():
    check(
        [
            ("\\{1,2\\}", "[1,2]", False),
            ("\\{1,2\\}", "(1,2)", False),
            ("\\{1,2\\}", "[1,2)", False),
            ("[1,2]", "\\{1,2\\}", False),
            ("[1,2]", "1, 2", False),
            ("(1,2)", "\\{1,2\\}", False),
            ("1, 2", "[1,2]", False),
            ("\\{1,2,3\\}", "(1,2,3)", False),
            ("\\{1,2\\}", "1, 2", True),
            ("\\{1,2\\}", "\\{2,1\\}", True),
            ("1, 2", "(1,2)", True),
            ("1, 2", "\\{1, 2\\}", True),
            ("[1,2]", "1 \\le x \\le 2", True),
            ("(1,2)", "(1,2)", True),
            ("[1,2]", "\\{x \\mid 1 \\le x \\le 2\\}", True),
            ("(3,\\infty)", "\\{x \\in \\mathbb{R} \\mid x > 3\\}", True),
            ("(3,\\infty)", "\\{x | x \\ge 3\\}", False),
            ("\\{1,2\\}", "\\{x \\mid 1 \\le x \\le 2\\}", False),
        ]
    )


def test_inequalities_and_intervals_both_ways():
    check(
        [
            ("-2 \\le x \\le 7", "x \\in [-2,7]", True),
            ("-2 \\le x \\le 7", "[-2,7]", True),
            ("x \\in [-2,7]", "-2 \\leq x \\leq 7", True),
            ("[-2,7]", "-2 \\le x \\le 7", True),
            ("0<f(x)<1", "(0,1)", True),
            ("(0,1)", "0<f(x)<1", True),
            ("(0,1)", "f(x) \\in (0,1)", True),
            ("x<-1 \\text{ or } x>2", "(-\\infty,-1)\\cup(2,\\infty)", True),
            ("(-\\infty,-1)\\cup(2,\\infty)", "x<-1 \\text{ or } x>2", True),
            ("(-\\infty,-1]\\cup(2,\\infty)", "x \\le -1 \\lor x > 2", True),
            ("(-\\infty,-1)\\cup(2,\\infty)", "x \\in (-\\infty,-1) \\text{ or } x \\in (2,\\infty)", True),
            ("-3 < x < 3", "|x| < 3", True),
            ("(-\\infty,-1]\\cup[3,\\infty)", "|x-1| \\ge 2", True),
            ("(-1,3)", "|1 - x| < 2", True),
            ("(-3,3)", "|x| \\le 3", False),
            ("(-3,3)", "|x| > 3", False),
            ("-2 \\le x \\le 7", "[-2,7)", False),
            ("(0,1)", "0<f(x) \\le 1", False),
            ("(-\\infty,-1)\\cup(2,\\infty)", "x<-1 \\text{ and } x>2", False),
            ("x \\le -1 \\text{ or } x > 2", "(-\\infty,-1)\\cup(2,\\infty)", False),
            ("(-\\infty,-1)\\cup(2,\\infty)", "x \\in (-\\infty,-1) \\text{ or } x \\in [2,\\infty)", False),
        ]
    )


# -- expressions in variables
def test_functions_differing_beyond_small_points_are_wrong():
    for gold, answer in [
        ("1", "\\lceil x^2/14 \\rceil"),
        ("x^2", "x^2 + \\lfloor x^2/100 \\rfloor"),
        ("x^2", "x^2 + \\lfloor x^2/10^{40} \\rfloor"),
        ("x", "x + \\lfloor x/10^{6} \\rfloor"),
        ("e^{x}", "e^{x}+e^{-1000}"),
        ("y=x^2", "y = x^2 + \\lfloor x^2/100 \\rfloor"),
        ("2x", "\\max(2x, x^2 - 10^{4})"),
        ("x", "|x|"),
        ("\\sqrt{2}", "\\sqrt{2}+e^{-100}"),
        ("x^2", "x^2 + (x/100)^{20}"),
        ("y = x^2", "y = x^2 + (x/100)^{20}"),
    ]:
        start = time.perf_counter()
        assert not is_correct(answer, gold), (gold, answer)
        assert time.perf_counter() - start < WORST_S, (gold, answer)


def test_equal_functions_stay_equal():
    check(
        [
            ("|x|", "\\sqrt{x^2}", True),
            ("\\lfloor x \\rfloor + 1", "\\lfloor x+1 \\rfloor", True),
            ("2|x|", "|2x|", True),
            ("x^2-1", "(x-1)(x+1)", True),
            ("x^x", "e^{x \\ln x}", True),
            ("e \\cdot e^{e^x}", "e^{e^x+1}", True),
            ("\\sin^2 x + \\cos^2 x", "1", True),
            ("\\frac{x^2-1}{x-1}", "x+1", True),
            ("\\ln|x| + C", "\\ln(|x|) + C", True),
            ("y=x^2", "y - x^2 = 0", True),
            ("(x+1)^{3}", "x^3+3x^2+3x+1", True),
        ]
    )


# -- plain-text constants
def test_plain_text_constants():
    check(
        [
            ("\\frac{\\pi}{2}", "pi/2", True),
            ("e", "\\text{e}", True),
            ("e", "\\mathrm{e}", True),
            ("e^{2}", "\\mathrm{e}^2", True),
            ("e^{2}", "\\text{e}^{2}", True),
            ("2e", "2\\mathrm{e}", True),
            ("\\sqrt{2}", "sqrt(2)", True),
            ("\\frac{\\sqrt{2}}{2}", "sqrt(2)/2", True),
            ("\\infty", "inf", True),
            ("(-\\infty, 2)", "(-inf, 2)", True),
            ("\\text{e}", "e", True),
            ("\\frac{\\pi}{3}", "pi/2", False),
            ("e", "\\text{e}^2", False),
            ("\\sqrt{3}", "sqrt(2)", False),
        ]
    )


# -- bounded: the wider comparisons never run away
HOSTILE = {
    "floors": "+".join(f"\\lfloor x/10^{{{40 + i}}} \\rfloor" for i in range(12)) + "+x^2+1",
    "kinks": "|x|+|x-1|-|x-1|+\\max(x, x)+\\min(x^2, x^2)-x+1",
    "many_units": "6 \\text{ " + " ".join(["km per h"] * 300) + "}",
    "unit_power": "6 \\text{ cm}^{999999}",
    "set_builder_nest": "\\{x \\mid " + "\\{x \\mid " * 30 + "x > 1" + "\\}" * 31,
    "sin_exp": "\\sin(e^{x}) + \\sin(e^{x^{2}}) + \\cos(e^{e^{x}})",
    "tan_poly": "\\tan(x^{9999})",
    "tower": "x^{x^{x^{x}}}",
    "floor_ratio": "\\frac{\\lfloor x^{12} \\rfloor}{x^{12}} + 7",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_comparisons_are_bounded_and_not_correct(name):
    for gold in ("x^2", "1", "5 \\text{ m}", "(1, \\infty)"):
        start = time.perf_counter()
        verdict = vm.verify(f"\\boxed{{{HOSTILE[name]}}}", gold)
        assert verdict.outcome is not Outcome.CORRECT, (name, gold, verdict.detail)
        assert time.perf_counter() - start < WORST_S, (name, gold)
