"""rlvr.verifiers.math: the numeric policy of `verifiers.math.decimals` (no tolerance) and the answer
forms it reads (nested and self-corrected boxes, leading-dot decimals, thousands grouped by
spaces, products in any order, plain-text constants, set algebra, matrix expressions, named
tuples, base subscripts). Real SymPy in real worker processes."""

from __future__ import annotations

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math import MathOptions
from rlvr.verifiers.math.final_answer import extract
from rlvr.verifiers.verdict import Outcome

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


def is_correct(answer: str, gold: str, **options) -> bool:
    verdict = vm.verify(
        f"The final answer is $\\boxed{{{answer}}}$.", gold, MathOptions(**options) if options else None
    )
    assert verdict.outcome is not Outcome.ERROR, verdict.detail
    return verdict.outcome is Outcome.CORRECT


def check(cases):
    wrong = [(g, a, e) for g, a, e in cases if is_correct(a, g) is not e]
    assert not wrong, wrong


def test_two_decimals_are_equal_only_as_decimals():
    check(
        [
            ("3.14", "3.140", True),
            ("3.14", "3.141", False),
            ("3.14", "3.1416", False),
            ("2.5", "2.50", True),
            ("1234.5678", "1234.5687", False),
            ("0.123456", "0.1234567", False),
            ("0.5", "0.5000000001", False),
            ("1.2e5", "120000.0", True),
            ("0.045", "0.45", False),
            ("12.5\\%", "0.125", True),
        ]
    )


def test_finite_expansions_match_only_themselves():
    check(
        [
            ("\\frac{1}{4}", "0.25", True),
            ("\\frac{1}{4}", "0.2500", True),
            ("\\frac{1}{4}", "0.2501", False),
            ("\\frac{1}{8}", "0.13", False),
            ("100", "99.99", False),
            ("7", "6.9999", False),
            ("7", "7.000", True),
            ("2^{100}", "1.268e30", False),
            ("\\frac{1}{1024}", "0.0009766", False),
        ]
    )


def test_decimal_answer_for_an_exact_gold_needs_every_shown_digit_and_four_of_them():
    check(
        [
            ("\\frac{1}{3}", "0.3333", True),
            ("\\frac{1}{3}", "0.333", False),
            ("\\frac{1}{3}", "0.3334", False),
            ("\\pi", "3.1416", True),
            ("\\pi", "3.1415", True),
            ("\\pi", "3.14", False),
            ("\\pi", "3.1417", False),
            ("\\sqrt{17}", "4.123", True),
            ("\\sqrt{17}", "4.124", False),
            ("2\\pi", "6.283", True),
            ("2\\pi", "6.28", False),
            ("\\frac{8}{3}", "2.667", True),
            ("\\frac{8}{3}", "2.666", True),
            ("-\\frac{1}{3}", "-0.3333", True),
            ("-\\frac{1}{3}", "0.3333", False),
            ("-\\pi", "-3.1415", True),
            ("e", "2.718", True),
            ("e", "2.719", False),
            ("33\\frac{1}{3}\\%", "33.33\\%", True),
            ("\\frac{\\pi}{6}", "0.5236", True),
            ("\\frac{1}{3}", "3.333\\times 10^{-1}", True),
        ]
    )
    assert not is_correct("0.3333", "\\frac{1}{3}", min_answer_digits=5)


def test_long_decimals_never_pass_for_irrationals():
    pi_35 = "3.14159265358979323846264338327950288"  # pi truncated: right
    check(
        [
            ("\\pi", pi_35, True),
            ("\\pi", pi_35[:-3] + "999", False),
            ("\\frac{1}{3}", "0.33333333333333331483", False),  # a float's digits
            ("\\frac{x}{3}", "0.3333333333333333333333333333333x", False),
            ("\\frac{\\pi}{3}", "0.3333333333333333333333333333333\\pi", False),
            ("y=\\frac{x}{3}", "y=0.3333333333333333333333333333333x", False),
            ("\\pi", "\\frac{314159265358979323846264338327950288}{10^{35}}", False),
        ]
    )


def test_exact_answer_for_a_decimal_gold():
    check(
        [
            ("3.14", "\\pi", True),
            ("0.333", "\\frac{1}{3}", True),
            ("3.15", "\\pi", False),
            ("0.333", "\\frac{3331}{10000}", False),
            ("0.3", "\\frac{1}{3}", False),
            ("0.524", "30^\\circ", False),
            ("0.524", "\\frac{\\pi}{6}", True),
            ("\\frac{\\pi}{6}", "30^\\circ", True),
        ]
    )  # degrees convert only for a pi gold
    assert not is_correct("\\pi", "3.14", round_to_gold=False)


def test_decimal_policy_holds_elementwise_in_containers():
    check(
        [
            ("\\left(\\frac{1}{3}, \\frac{2}{3}\\right)", "(0.3333, 0.6667)", True),
            ("\\left(\\frac{1}{3}, \\frac{2}{3}\\right)", "(0.3333, 0.667)", False),
            ("\\{\\sqrt{2}, -\\sqrt{2}\\}", "\\{-1.4142, 1.4142\\}", True),
            ("\\{\\sqrt{2}, -\\sqrt{2}\\}", "\\{-1.41, 1.41\\}", False),
            ("\\left[\\frac{8}{3}, 5\\right)", "[2.667, 5)", True),
            ("\\left[\\frac{8}{3}, 5\\right)", "2.667 \\le x < 5", True),
            ("\\left[\\frac{8}{3}, 5\\right)", "[2.67, 5)", False),
            ("(0, \\sqrt{2})", "0 < x < 1.4142", True),
            ("\\begin{pmatrix} \\frac{1}{3} & 1 \\end{pmatrix}", "\\begin{pmatrix} 0.3333 & 1 \\end{pmatrix}", True),
            ("\\begin{pmatrix} \\frac{1}{3} & 1 \\end{pmatrix}", "\\begin{pmatrix} 0.33 & 1 \\end{pmatrix}", False),
            ("(1.25, 3.5)", "(1.52, 3.5)", False),
        ]
    )


def test_nested_box_is_one_box():
    assert extract("so $\\boxed{\\boxed{9}}$").answers == ("9",)
    check([("9", "\\boxed{9}", True), ("9", "\\boxed{8}", False), ("x=2", "x = \\boxed{2}", True)])


def test_last_box_after_a_self_correction():
    fixed = "So \\boxed{12}. Wait, I forgot two corner cases, so the total is \\boxed{14}."
    assert extract(fixed).answers == ("14",)
    assert vm.verify(fixed, "14").outcome is Outcome.CORRECT
    assert vm.verify(fixed, "12").outcome is Outcome.INCORRECT
    mistake = "First \\boxed{21}, but that was a mistake: the count is \\boxed{12}."
    assert vm.verify(mistake, "12").outcome is Outcome.CORRECT
    # no retraction between them: two different boxes stay a hedge
    assert vm.verify("It is \\boxed{3} or \\boxed{4}.", "4").outcome is Outcome.INCORRECT


def test_leading_dot_decimals():
    check([("0.4", ".4", True), ("0.4", ".04", False), ("-0.25", "-.25", True)])
    assert vm.verify("so the answer is .4", "0.4").outcome is Outcome.CORRECT
    assert vm.verify("so the ratio is .4", "0.4", MathOptions(require_marker=False)).outcome is Outcome.CORRECT
    assert extract("Dividing, we get .75", require_marker=False).answers == (".75",)


def test_thousands_grouped_by_spaces():
    check(
        [
            ("7425000", "7 425 000", True),
            ("7425000", "742 500", False),
            ("12000.5", "12 000.5", True),
            ("3\\frac{500}{999}", "3 500/999", True),
        ]
    )
    assert vm.verify("The answer is 1 234 567 people.", "1234567").outcome is Outcome.CORRECT


def test_implicit_products_in_any_order():
    check(
        [
            ("xy", "yx", True),
            ("abc", "cba", True),
            ("3ab^2", "3b^2a", True),
            ("xy", "x+y", False),
            ("2\\pi r", "2r\\pi", True),
            ("\\text{Bob}", "Bob", True),
            ("\\text{odd}", "odd", True),
        ]
    )


def test_plain_text_constants():
    check(
        [
            ("\\frac{\\pi}{2}", "pi/2", True),
            ("\\frac{\\pi}{2}", "pi/3", False),
            ("2\\pi", "2pi", True),
            ("\\frac{\\sqrt{3}}{2}", "sqrt(3)/2", True),
        ]
    )
    assert vm.verify("The answer is pi/2", "\\frac{\\pi}{2}").outcome is Outcome.CORRECT


def test_set_algebra_in_the_answer():
    check(
        [
            ("\\{1,2,3,4\\}", "\\{1,3\\} \\cup \\{2,4\\}", True),
            ("\\{1,2,3,4\\}", "\\{1,3\\} \\cup \\{2,5\\}", False),
            ("\\{2\\}", "\\{1,2,3\\} \\cap \\{2,4\\}", True),
            ("\\{1\\}", "\\{1,2\\} \\setminus \\{2\\}", True),
            ("[0,3]", "[0,1] \\cup [1,3]", True),
            ("3", "\\{3\\} \\cup \\{4\\}", False),
        ]
    )


M = "\\begin{{pmatrix}} {} \\end{{pmatrix}}"


def test_matrix_expressions():
    a, b = M.format("1 & 2 \\\\ 3 & 4"), M.format("1 & 0 \\\\ 0 & 1")
    check(
        [
            (M.format("2 & 4 \\\\ 6 & 8"), "2" + a, True),
            (M.format("2 & 4 \\\\ 6 & 8"), a + " + " + a, True),
            (M.format("2 & 2 \\\\ 3 & 5"), a + " + " + b, True),
            (M.format("0 & 2 \\\\ 3 & 3"), a + " - " + b, True),
            (M.format("7 & 10 \\\\ 15 & 22"), a + a, True),
            (M.format("1 & 2 \\\\ 3 & 4"), "\\frac{1}{2}" + M.format("2 & 4 \\\\ 6 & 8"), True),
            (M.format("-1 & -2 \\\\ -3 & -4"), "-" + a, True),
            (M.format("2 & 4 \\\\ 6 & 9"), "2" + a, False),
            (M.format("2 & 4 \\\\ 6 & 8"), "2 + " + a, False),
        ]
    )


def test_named_tuple_assignment():
    check(
        [
            ("(3,2)", "(p,q)=(3,2)", True),
            ("(3,2)", "(p,q)=(2,3)", False),
            ("p=3, q=2", "(p, q) = (3, 2)", True),
            ("(p,q)=(3,2)", "(3, 2)", True),
            ("(1,2,3)", "(a,b,c) = (1,2,3)", True),
        ]
    )


def test_base_subscripts_are_values():
    check(
        [
            ("5", "101_2", True),
            ("5", "101_3", False),
            ("255", "FF_{16}", True),
            ("101_2", "5_{10}", True),
            ("10", "1010", False),
            ("204_5", "204", True),
            ("1011_2", "11", False),
            ("5", "102_2", False),
        ]
    )


def _reference(value, shown: str) -> bool:
    """The policy for an exact gold without a finite expansion, computed independently with mpmath."""
    import mpmath

    body = shown.lstrip("-")
    whole, _, frac = body.partition(".")
    if len((whole + frac).lstrip("0")) < 4:
        return False
    n = int(whole + frac) * (-1 if shown.startswith("-") else 1)
    with mpmath.workdps(60):
        x = value * mpmath.mpf(10) ** len(frac)
        low = int(mpmath.floor(x))
        truncated = low if value >= 0 else low + 1
        rounded = low if x - low < 0.5 else low + 1
    return n in (truncated, rounded)


def test_decimal_policy_matches_an_independent_reference():
    """Every rounding, truncation and one-off of eight exact golds at 1 to 7 decimals."""
    import mpmath

    golds = {
        "\\frac{2}{7}": mpmath.mpf(2) / 7,
        "\\sqrt{10}": mpmath.sqrt(10),
        "3\\pi": 3 * mpmath.pi,
        "e^{2}": mpmath.e**2,
        "-\\frac{5}{3}": mpmath.mpf(-5) / 3,
        "\\ln 3": mpmath.log(3),
        "\\frac{100}{7}": mpmath.mpf(100) / 7,
        "\\frac{\\sqrt{2}}{1000}": mpmath.sqrt(2) / 1000,
    }
    mismatches = []
    for gold, value in golds.items():
        for places in range(1, 8):
            with mpmath.workdps(60):
                base = int(mpmath.floor(value * mpmath.mpf(10) ** places))
            for n in (base - 1, base, base + 1, base + 2):
                digits = str(abs(n)).rjust(places + 1, "0")
                shown = ("-" if n < 0 else "") + digits[:-places] + "." + digits[-places:]
                if is_correct(shown, gold) is not _reference(value, shown):
                    mismatches.append((gold, shown))
    assert not mismatches, mismatches
