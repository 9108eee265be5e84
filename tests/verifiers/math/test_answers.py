"""rlvr.verifiers.math: what the final answer IS (issue #27). For each class, the wrong answers score 0
and the right ones 1: negations and retractions, hedges, false statements, numbers glued to
words, thousands separators, labelled golds and answers. Real SymPy in real worker processes."""

from __future__ import annotations

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math import MathOptions
from rlvr.verifiers.math.final_answer import extract
from rlvr.verifiers.verdict import Outcome

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


LENIENT = MathOptions(require_marker=False)  # the last number stands in for a missing marker


def score(response: str, gold: str, options: MathOptions | None = None) -> float:
    verdict = vm.verify(response, gold, options)
    assert verdict.outcome is not Outcome.ERROR, verdict.detail
    return verdict.score


def all_score(cases: list[tuple[str, str]], expected: float, options: MathOptions | None = None) -> None:
    wrong = [
        (gold, response, vm.verify(response, gold, options).detail)
        for response, gold in cases
        if score(response, gold, options) != expected
    ]
    assert not wrong, wrong


def unmarked_score(cases: list[tuple[str, str]], lenient: float) -> None:
    """Answers stated without a marker: 0 by default (issue 38: no marker, no answer), `lenient`
    with `require_marker=False`, which reads the unmarked value as before."""
    all_score(cases, 0.0)
    all_score(cases, lenient, LENIENT)


# -- negation and retraction: an answer the text denies or takes back is not the answer
DENIED = [
    ("the answer is not 5", "5"),
    ("The answer is certainly not 7.", "7"),
    ("it is certainly not 7", "7"),
    ("The answer isn't 5.", "5"),
    ("The answer is not equal to 5", "5"),
    ("\\boxed{\\text{not } 5}", "5"),
    ("We can rule out $\\boxed{6}$ at once.", "6"),
    ("so it is impossible for the sum to equal $9$.", "9"),
    ("There is no way the answer is 6.", "6"),
    ("the answer is anything except 9", "9"),
    ("So $-1$ is not a root after all.", "-1"),
    ("<answer>not 4</answer>", "4"),
    ("A common mistake is to answer $\\boxed{5}$.", "5"),
    ("It is $x \\ne 3$.", "3"),
]
RETRACTED = [
    ("The answer is 2. ... no, the final value is 3.", "2"),
    ("The answer is 2. Wait, that is wrong: it is 3.", "2"),
    (
        "So the answer is $\\boxed{12}$. Actually, let me recheck: $4 \\times 4 = 16$, not $12$, so the answer is 16.",
        "12",
    ),
    ("**Final Answer**\n\\[\\boxed{9}\\]\nWait, that's not right. So the answer is 8.", "9"),
    ("<answer>5</answer>\nActually, scratch that: 5 fails. The correct value is 7.", "5"),
    ("I claimed the answer was 20, but that was wrong.", "20"),
    ("The final answer is $\\boxed{100}$.\n\nOn reflection, I misread the problem. The final answer is 50.", "100"),
    ("$\\boxed{8}$... no. That counts the empty set. The answer is $\\boxed{7}$.", "8"),
]
UNMARKED_CORRECTIONS = [  # a retraction, then a new value that no marker commits to
    ("The answer is 2. ... no, the final value is 3.", "3"),
    ("<answer>5</answer>\nActually, scratch that: 5 fails. The correct value is 7.", "7"),
    ("x cannot be negative, so x = 5", "5"),
]
STATED = [  # the same texts where they are right, and plain statements that merely mention a "not"
    ("The answer is 2. ... no, the final answer is 3.", "3"),
    (
        "So the answer is $\\boxed{12}$. Actually, let me recheck: $4 \\times 4 = 16$, not $12$, so the answer is 16.",
        "16",
    ),
    ("<answer>5</answer>\nActually, scratch that: 5 fails. The correct answer is 7.", "7"),
    ("A common mistake is to answer $\\boxed{5}$, but the correct answer is $\\boxed{7}$.", "7"),
    ("$\\boxed{8}$... no. That counts the empty set. The answer is $\\boxed{7}$.", "7"),
    ("The answer is 7, not 5.", "7"),
    ("The answer is not 5 but 6.", "6"),
    ("It is not hard to see that the answer is 6.", "6"),
    ("Since 4 is not prime, the answer is $\\boxed{5}$.", "5"),
    ("x cannot be negative, so the answer is x = 5", "5"),
    ("\\boxed{1} (mistake) \\boxed{2}", "2"),
    ("The answer is \\boxed{12}. Let me double-check: 3 * 4 = 12. Yes.", "12"),
    ("Final Answer: The final answer is $12$. I hope it is correct.", "12"),
]


@pytest.mark.parametrize("response,gold", DENIED + RETRACTED)
def test_denied_or_retracted_answer_scores_0(response, gold):
    verdict = vm.verify(response, gold)
    assert verdict.outcome is Outcome.INCORRECT or verdict.outcome is Outcome.FORMAT_ERROR, verdict
    assert verdict.score == 0.0


def test_stated_answer_scores_1():
    all_score(STATED, 1.0)


def test_a_correction_needs_a_marker_of_its_own():
    unmarked_score(UNMARKED_CORRECTIONS, lenient=1.0)


def test_a_later_marked_answer_supersedes_a_box():
    all_score(
        [("\\boxed{2}. The answer is 3.", "3"), ("\\boxed{6} fails. Final Answer: The final answer is $5$.", "5")], 1.0
    )
    all_score([("\\boxed{2}. The answer is 3.", "2"), ("\\boxed{5}. The answer is 6.", "5")], 0.0)


def test_denial_is_incorrect_with_its_reason():
    verdict = vm.verify("the answer is not 5", "5")
    assert verdict.outcome is Outcome.INCORRECT and verdict.detail.startswith("denied")


# -- hedges: several different final answers are wrong for each of them
HEDGES = [
    "The answer is 2 or 3.",
    "The answer is either 2 or 3.",
    "x = 2, or maybe x = 3",
    "The answer is 2 (or possibly 3).",
    "It is 2 (or perhaps 3).",
    "\\boxed{2} and \\boxed{3}",
    "The answer is $2$ or $3$.",
    "It is 2, or maybe 3",
    "\\boxed{2}, though 3 is also possible.",
    "I think 2 but maybe 3",
    "2 or 3 (not sure)",
]


@pytest.mark.parametrize("response", HEDGES)
def test_hedge_scores_0_for_each_value(response):
    assert score(response, "2") == 0.0 and score(response, "3") == 0.0


def test_hedge_of_one_value_and_a_list_gold():
    all_score(
        [
            ("The answer is 2 or 3.", "2, 3"),
            ("\\boxed{2} \\boxed{2.0}", "2"),
            ("\\boxed{x = 2 \\text{ or } x = 3}", "\\{2, 3\\}"),
        ],
        1.0,
    )


# -- statements that are false: an equation of two different constants states nothing
def test_false_statement_scores_0_and_a_true_one_states_its_value():
    all_score(
        [
            ("\\boxed{7 = 5}", "5"),
            ("\\boxed{5 = 7}", "5"),
            ("\\boxed{x = 5 = 7}", "7"),
            ("\\boxed{2 + 3 = 6}", "6"),
            ("\\boxed{|AB| = 2 = 3}", "3"),
        ],
        0.0,
    )
    all_score(
        [
            ("\\boxed{5 = 5}", "5"),
            ("\\boxed{x = 5}", "5"),
            ("\\boxed{2 + 3 = 5}", "5"),
            ("\\boxed{x = \\frac{4}{2} = 2}", "2"),
            ("\\boxed{\\frac{1}{3} = 0.333}", "0.333"),
        ],
        1.0,
    )


# -- a digit inside a word is not a number
def test_number_glued_to_a_word_is_not_that_number():
    all_score(
        [
            ("so AZYUK2A", "2"),
            ("\\boxed{AZYUK2A}", "2"),
            ("The answer is AZYUK2A", "2"),
            ("<answer>COVID19</answer>", "19"),
            ("The code is x2", "2"),
            ("so we get 5x", "5"),
        ],
        0.0,
    )
    all_score([("so the answer is 5 cm", "5"), ("\\boxed{\\sin 2x}", "\\sin(2x)")], 1.0)
    unmarked_score(
        [
            ("The distance is 5km", "5"),
            ("It is the 3rd", "3"),
            ("the angle is pi/2", "\\frac{\\pi}{2}"),
            ("the height is \u221a3", "\\sqrt{3}"),
        ],
        lenient=1.0,
    )


# -- thousands separators in final answers
def test_thousands_separators_in_a_final_answer():
    right = [
        "... the answer is $10,455$",
        "\\boxed{10{,}455}",
        "\\boxed{10\\,455}",
        "The answer is 10,455.",
        "Final answer: 10,455",
        "\\boxed{10\\ 455}",
        "The answer is 10 455",
        "$\\boxed{10,455}$ dollars",
    ]
    all_score([(r, "10455") for r in right], 1.0)
    unmarked_score([("so the total is 10,455", "10455")], lenient=1.0)
    all_score([("\\boxed{10455}", "10,455"), ("\\boxed{12,345,678}", "12345678")], 1.0)
    all_score(
        [
            ("\\boxed{(10, 455)}", "10455"),
            ("\\boxed{10, 455}", "10455"),
            ("\\boxed{10,45}", "1045"),
            ("\\boxed{1,234}", "1234.5"),
        ],
        0.0,
    )


def test_a_list_gold_reads_commas_as_separators():
    all_score([("\\boxed{1,2}", "1, 2"), ("\\boxed{1,234}", "1, 234"), ("\\boxed{(10, 455)}", "(10, 455)")], 1.0)
    all_score([("\\boxed{1,234}", "1, 235"), ("\\boxed{10,455}", "(10, 456)")], 0.0)


# -- labelled golds and answers
LABELLED_RIGHT = [
    ("\\boxed{1}", "|AB|=1"),
    ("\\boxed{1}", "A:B=1"),
    ("\\boxed{\\frac{1}{\\sqrt6}}", "\\frac{NO}{BO}=\\frac{1}{\\sqrt6}"),
    ("\\boxed{11:21}", "V_1:V_2=11:21"),
    ("\\boxed{\\frac{11}{21}}", "V_1:V_2=11:21"),
    ("\\boxed{1, 2}", "x_1=1, x_2=2"),
    ("\\boxed{|AB|=1}", "1"),
    ("\\boxed{V_1:V_2=11:21}", "11:21"),
    ("\\boxed{V_1:V_2=22:42}", "V_1:V_2=11:21"),
    ("\\boxed{\\frac{NO}{BO}=\\frac{\\sqrt6}{6}}", "\\frac{NO}{BO}=\\frac{1}{\\sqrt6}"),
    ("The answer is $|AB| = 2\\sqrt{3}$.", "2\\sqrt3"),
    ("\\boxed{x_1 = 1, x_2 = 2}", "1, 2"),
    ("\\boxed{AB = 3}", "3"),
    ("\\boxed{2:4}", "1:2"),
    ("\\boxed{0.5}", "1:2"),
]
LABELLED_WRONG = [
    ("\\boxed{2}", "|AB|=1"),
    ("\\boxed{|CD|=1}", "|AB|=1"),
    ("\\boxed{21:11}", "V_1:V_2=11:21"),
    ("\\boxed{V_2:V_1=11:21}", "V_1:V_2=11:21"),
    ("\\boxed{\\frac{1}{\\sqrt5}}", "\\frac{NO}{BO}=\\frac{1}{\\sqrt6}"),
    ("\\boxed{|AB|=2}", "1"),
    ("\\boxed{x + 1 = 5}", "5"),
    ("\\boxed{2x = 10}", "10"),
    ("\\boxed{1, 3}", "x_1=1, x_2=2"),
    ("\\boxed{11:20}", "11:21"),
]


def test_labelled_answers_compare_their_values():
    all_score([(r, g) for r, g in LABELLED_RIGHT], 1.0)
    all_score([(r, g) for r, g in LABELLED_WRONG], 0.0)


def test_time_of_day_stays_text():
    all_score([("\\boxed{1:30 pm}", "1:30 pm")], 1.0)
    all_score([("\\boxed{2:30 pm}", "1:30 pm")], 0.0)


def test_extraction_reports_denials_and_retractions():
    assert extract("The answer is certainly not 7.").denied == "certainly not 7"
    assert not extract("it is certainly not 7").answers
    assert extract("it is certainly not 7", require_marker=False).denied == "7"
    assert extract("The answer is 2. ... no, the final value is 3.").answers == ()  # 3 is unmarked
    assert extract("The answer is 2. ... no, the final value is 3.", require_marker=False).answers == ("3",)
    assert extract("x = 2, or maybe x = 3", require_marker=False).answers == ("2 \\text{ or } 3",)
    assert extract("so AZYUK2A").answers == ()


# -- more denials: struck out, counterfactual, judged in place, qualified, "≠"
def test_struck_counterfactual_judged_and_qualified_answers_score_0():
    all_score(
        [
            ("Counting again, the answer is ~~5~~ 6.", "5"),
            ("The answer is \\sout{5} 6.", "5"),
            ("If the answer were 3, the triangle would be degenerate, which is impossible.", "3"),
            ("The answer would be 9 if the die were fair, but it is not.", "9"),
            ("Final answer: 4 (incorrect, see below).\n\nI mis-added the last column. Corrected: 5", "4"),
            ("The answer is a multiple of 12, such as 24.", "12"),
            ("The answer is at least 5.", "5"),
            ("\\boxed{\\text{more than } 5}", "5"),
            ("The answer is \u2260 5.", "5"),
            ("The answer is 5?", "5"),
        ],
        0.0,
    )
    all_score(
        [
            ("Counting again, the answer is ~~5~~ 6.", "6"),
            ("Final answer: 4 (incorrect, see below).\n\nI mis-added the last column. Final answer: 5", "5"),
            ("The answer is approximately 3.14.", "3.14"),
            ("The answer is 12 (the least common multiple).", "12"),
            ("The answer is 5 (not 6).", "5"),
        ],
        1.0,
    )
    unmarked_score(
        [
            ("Final answer: 4 (incorrect, see below).\n\nI mis-added the last column. Corrected: 5", "5"),
            ("If we add them, we get 12.", "12"),
        ],
        lenient=1.0,
    )


# -- plain-text forms and units around the last number, dollar amounts
def test_last_number_keeps_its_constant_and_unit():
    unmarked_score(
        [
            ("The sum of the series times six is pi^2.", "\\pi^2"),
            ("The diagonal is 3 sqrt(2).", "3\\sqrt{2}"),
            ("The ladder reaches 500 cm.", "5 \\text{ m}"),
        ],
        lenient=1.0,
    )
    all_score(
        [
            ("\\boxed{\\$0.20}", "20 \\text{ cents}"),
            ("\\boxed{\\tan\\alpha = 2}", "2"),
            ("\\boxed{2}", "\\tan\\alpha = 2"),
        ],
        1.0,
    )
    all_score(
        [
            ("The ladder reaches 5 km.", "5 \\text{ m}"),
            ("The price is $20 \\text{ cents}$.", "\\$20"),
            ("\\boxed{\\pi = 3.15}", "3.15"),
        ],
        0.0,
    )


# -- another's claim, suppositions, "had we ..." counterfactuals; evaluated labels; plain-text formulas
def test_claims_suppositions_and_counterfactuals_score_0():
    all_score(
        [
            ("The textbook says 15, which is a typo.", "15"),
            ("Suppose the answer is 5. Then the sum would be 26, a contradiction.", "5"),
            ("Had we counted each pair twice, we would get 12.", "12"),
        ],
        0.0,
    )
    all_score(
        [
            ("Assuming the die is fair, the answer is 6.", "6"),
            ("<answer>7</answer>", "f(2) = 7"),
            ("\\boxed{f(2) = 7}", "7"),
        ],
        1.0,
    )
    unmarked_score(
        [("The sine of 60 degrees is sqrt(3)/2.", "\\sqrt{3}/2"), ("The area of the disc is pi*r^2.", "\\pi r^2")],
        lenient=1.0,
    )
    all_score([("\\boxed{f(3) = 7}", "f(2) = 7")], 0.0)


def test_judged_claims_and_corrections_in_place():
    all_score(
        [
            ("The claim that the answer is 9 is false.", "9"),
            ("Answer 11 was rejected by the checker.", "11"),
            ("Many students answer 20; they are mistaken.", "20"),
            ("Even if we ignored the constraint we would only get 14.", "14"),
            ("The answer isn't 2 \u2014 it's 3.", "2"),
            ("Answer: 8? No \u2014 9.", "8"),
        ],
        0.0,
    )
    all_score([("Answer: 8? No \u2014 9.", "9")], 1.0)
    unmarked_score(
        [
            ("The answer isn't 2 \u2014 it's 3.", "3"),
            ("So the volume is 4/3*pi*r^3.", "\\frac{4}{3}\\pi r^3"),
            ("The vertex is at x = -b/(2a).", "-\\frac{b}{2a}"),
        ],
        lenient=1.0,
    )
