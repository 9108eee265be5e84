"""rlvr.verifiers.math: accuracy on the labelled corpus, one focused test per answer category,
extraction, and typed errors for misuse. Real SymPy in real worker processes throughout."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math import MathOptions, VerifierTypeError
from rlvr.verifiers.math.final_answer import extract
from rlvr.verifiers.verdict import Outcome, VerifierError
from tests.verifiers.math.corpora import expected

CORPUS = Path(__file__).resolve().parents[2] / "data" / "math_corpus.jsonl"


pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


def is_correct(response: str, gold: str, **options) -> bool:
    verdict = vm.verify(response, gold, MathOptions(**options) if options else None)
    assert verdict.outcome is not Outcome.ERROR, verdict.detail
    return verdict.outcome is Outcome.CORRECT


def test_corpus_accuracy_at_least_097():
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()]
    assert len(rows) >= 400
    cats = Counter(r["category"] for r in rows)
    assert len(cats) >= 18 and sum(not r["expected"] for r in rows) >= 120  # varied, many negatives
    wrong = [r for r in rows if (vm.verify(r["response"], r["gold"]).outcome is Outcome.CORRECT) != expected(r)]
    accuracy = 1 - len(wrong) / len(rows)
    assert accuracy >= 0.97, [(r["gold"], r["response"][-60:]) for r in wrong[:10]]


B = "The final answer is $\\boxed{{{}}}$."

CASES = {
    "integers": [("42", "042", True), ("42", "42.0", True), ("-7", "7", False), ("12", "12.5", False)],
    "fractions": [
        ("\\frac{3}{4}", "\\dfrac{6}{8}", True),
        ("\\frac{7}{2}", "3\\frac12", True),
        ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", False),
        ("\\frac{3}{4}", "3/4", True),
    ],
    "decimals": [
        ("0.5", "\\frac{1}{2}", True),
        ("\\frac{1}{3}", "0.333", False),
        ("0.333", "\\frac13", True),
        ("0.2", "\\frac{1}{4}", False),
        ("2.5", "2.49", False),
    ],
    "scientific": [
        ("1.2\\times10^{5}", "120000", True),
        ("1.2e5", "1.2e6", False),
        ("2.5\\times10^{-3}", "0.0025", True),
    ],
    "thousands": [("7425000", "7,425,000", True), ("7425000", "7\\,425\\,000", True), ("7425000", "742,500", False)],
    "percent": [("25\\%", "25", True), ("25\\%", "0.25", True), ("25\\%", "2.5\\%", False), ("25", "0.25", False)],
    "units": [("5", "5 \\text{ cm}", True), ("\\text{Monday}", "\\text{Tuesday}", False), ("\\text{(B)}", "B", True)],
    "degrees": [("30^\\circ", "\\frac{\\pi}{6}", True), ("30^\\circ", "60^\\circ", False), ("90", "90^{\\circ}", True)],
    "pi_roots": [
        ("\\sqrt{8}", "2\\sqrt{2}", True),
        ("2\\pi", "6.28", False),
        ("3.14", "\\pi", True),
        ("\\frac{1+\\sqrt{5}}{2}", "\\frac{2}{\\sqrt{5}-1}", True),
    ],
    "symbolic": [("x^2-1", "(x-1)(x+1)", True), ("x^2-1", "(x-1)^2", False), ("\\sin^2 x + \\cos^2 x", "1", True)],
    "equations": [("x=3", "3", True), ("3", "x=3", True), ("y=2x+1", "y-2x=1", True), ("x=3", "x=-3", False)],
    "inequalities": [("x>3", "3<x", True), ("x>3", "x\\ge 3", False), ("x\\le 5", "(-\\infty, 5]", True)],
    "intervals": [
        ("[1,2)", "[1,2]", False),
        ("(1,2]", "1<x\\le 2", True),
        ("(0,1)\\cup(2,3)", "(2,3)\\cup(0,1)", True),
    ],
    "sets_tuples": [
        ("\\{1,2,3\\}", "3, 2, 1", True),
        ("(1,2)", "(2,1)", False),
        ("\\pm 3", "3, -3", True),
        ("x=1, y=2", "(1, 2)", True),
    ],
    "matrices": [
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", True),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}", False),
    ],
    "complex": [("3+4i", "4i+3", True), ("3+4i", "3-4i", False), ("-1", "i^2", True)],
    "infinity": [("\\infty", "\\infty", True), ("\\infty", "-\\infty", False), ("(0,\\infty)", "x>0", True)],
    "bases": [("204_5", "204_{5}", True), ("204_5", "204_6", False), ("1011_2", "11", False)],
}


@pytest.mark.parametrize(
    "gold,answer,expected",
    [pytest.param(g, a, e, id=f"{cat}-{i}") for cat, rows in CASES.items() for i, (g, a, e) in enumerate(rows)],
)
def test_category(gold, answer, expected):
    assert is_correct(B.format(answer), gold) is expected


def test_policies_are_options():
    assert is_correct(B.format("0.25"), "25\\%")
    assert not is_correct(B.format("0.25"), "25\\%", percent="number")
    assert not is_correct(B.format("25"), "25\\%", percent="fraction")
    assert not is_correct(B.format("\\frac{\\pi}{6}"), "30^\\circ", angles="degrees")
    assert not is_correct(B.format("\\pi"), "3.14", round_to_gold=False)
    assert is_correct("\\boxed{3} or \\boxed{4}", "4", hedge="last")


def test_extraction_sources():
    assert extract("so \\fbox{12}.").answers == ("12",)
    assert extract("<think>\\boxed{10}</think> The answer is \\boxed{12}").answers == ("12",)
    assert extract("<answer>12</answer>").answers == ("12",)
    assert extract("Final Answer: The final answer is $12$. I hope it is correct.").answers == ("12",)
    assert extract("Adding, 5 + 7 = 12").answers == ()  # no marker: no answer (issue 38)
    assert extract("Adding, 5 + 7 = 12", require_marker=False).answers == ("12",)
    assert extract("\\boxed{1} and \\boxed{2}").answers == ("1", "2")
    assert extract("The answer is \\boxed{5").unclosed


def test_verdict_shape_and_outcomes():
    good = vm.verify("Thus $\\boxed{\\frac{1}{2}}$.", "0.5")
    assert (good.score, good.outcome) == (1.0, Outcome.CORRECT)
    assert good.info["verifier_version"] == vm.VERSION and good.info["extracted"] == ["\\frac{1}{2}"]
    assert vm.verify("\\boxed{7}", "8").outcome is Outcome.INCORRECT
    assert vm.verify("I am not sure.", "8").outcome is Outcome.FORMAT_ERROR
    assert vm.verify("The answer is \\boxed{8", "8").outcome is Outcome.FORMAT_ERROR
    hedged = vm.verify("It is \\boxed{3} or \\boxed{4}.", "3")
    assert hedged.outcome is Outcome.INCORRECT and "hedged" in hedged.detail


def test_two_plain_integers_are_judged_without_sympy():
    """The fast path: integers of different value are wrong at once, leading zeros and signs
    included (a small model's "09" for 70); equal values written differently (-0, 007, +5) and
    anything else that differs as a string (1,000, 12.0) still go to SymPy and are judged equal."""
    for answer, gold in [
        ("12", "13"),
        ("-5", "5"),
        ("09", "70"),
        ("-00", "-27"),
        ("+5", "-5"),
        ("007", "70"),
        ("0" * 29 + "1", "10"),
    ]:
        verdict = vm.verify(f"\\boxed{{{answer}}}", gold)
        assert (verdict.outcome, verdict.detail) == (Outcome.INCORRECT, "a different integer"), (answer, gold)
    assert vm.verify("\\boxed{" + "9" * 31 + "}", "1").detail != "a different integer"  # too long: the judge
    for answer, gold in [("-0", "0"), ("007", "7"), ("+5", "5"), ("1,000", "1000"), ("12.0", "12"), ("12", "12.0")]:
        verdict = vm.verify(f"\\boxed{{{answer}}}", gold)
        assert verdict.outcome is Outcome.CORRECT, (answer, gold, verdict.detail)


def test_clean_leaves_a_plain_integer_as_it_is():
    """`clean` returns a plain integer (digits, an optional sign) at once: the same string its
    rules give when they run (a leading space takes the slow path, and is stripped there)."""
    from rlvr.verifiers.math.normalize import clean

    for answer in ["0", "7", "-5", "+5", "007", "-00", "1000", "1" * 40]:
        assert clean(answer) == clean(" " + answer) == answer
    assert clean("1,000") == "1000" and clean("5.") == "5" and clean("\\$ ") == ""  # not plain: cleaned
    assert clean("\\$5") == "5 \\text{ dollars}"  # a dollar amount keeps its unit (20 cents is not \$20)


def test_misuse_is_a_typed_error():
    with pytest.raises(TypeError):
        vm.verify(5, "5")
    with pytest.raises(VerifierError):
        vm.verify("5", None)
    with pytest.raises(VerifierTypeError):
        vm.verify("5", "5", options={"percent": "either"})
    with pytest.raises(VerifierError, match="empty"):
        vm.verify("5", "  ")
    with pytest.raises(VerifierError):
        MathOptions(percent="sometimes")
    with pytest.raises(VerifierError):
        MathOptions(timeout_s=0)
