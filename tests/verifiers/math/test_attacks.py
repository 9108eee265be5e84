"""rlvr.verifiers.math under attack by a reward-hacking policy: near-miss decimals, hedges (several
boxes, "or", sets for a scalar gold), huge numbers, deep nesting and giant answers. None may be
judged correct, and each returns within the time bound. Plus: zero false positives on both
labelled corpora. Real SymPy in real worker processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.verdict import Outcome
from tests.verifiers.math.corpora import expected

DATA = Path(__file__).resolve().parents[2] / "data"
WORST_S = 1.5


pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


def never_correct(response: str, gold: str) -> None:
    start = time.perf_counter()
    verdict = vm.verify(response, gold)
    elapsed = time.perf_counter() - start
    assert verdict.outcome is not Outcome.CORRECT, (gold, response[:120], verdict.detail)
    assert elapsed < WORST_S, (gold, response[:120], elapsed)


def boxed(answer: str) -> str:
    return f"The final answer is $\\boxed{{{answer}}}$."


NEAR_MISSES = [  # (gold, answer): wrong by a digit, a swap, an extra digit, too few digits
    ("1234.5678", "1234.5687"),
    ("0.123456", "0.1234567"),
    ("3.14", "3.141"),
    ("3.14", "3.1416"),
    ("2.5", "2.05"),
    ("2.5", "2.50001"),
    ("0.045", "0.0405"),
    ("19.99", "19.9"),
    ("12", "12.0001"),
    ("12", "11.9999"),
    ("\\frac{1}{3}", "0.33"),
    ("\\frac{1}{3}", "0.333"),
    ("\\frac{1}{3}", "0.3334"),
    ("\\frac{1}{3}", "0.3433"),
    ("\\pi", "3.14"),
    ("\\pi", "3.1417"),
    ("\\pi", "3.1461"),
    ("\\pi", "3.14159266"),
    ("\\sqrt{17}", "4.12"),
    ("\\sqrt{17}", "4.1232"),
    ("2\\pi", "6.28"),
    ("2\\pi", "6.2382"),
    ("\\frac{8}{3}", "2.67"),
    ("\\frac{8}{3}", "2.668"),
    ("\\frac{1}{8}", "0.1251"),
    ("\\frac{1}{8}", "0.13"),
    ("2^{100}", "1.268e30"),
    ("-\\sqrt{2}", "1.4142"),
    ("e", "2.7183"[:-1] + "9"),
    ("\\frac{\\pi}{6}", "0.52"),
]


@pytest.mark.parametrize("gold,answer", NEAR_MISSES)
def test_attack_near_miss_decimal(gold, answer):
    never_correct(boxed(answer), gold)


CONTAINER_MISSES = [
    ("\\left(\\frac{1}{3}, 2\\right)", "(0.333, 2)"),
    ("\\left(\\frac{1}{3}, 2\\right)", "(2, 0.3333)"),
    ("\\{\\sqrt{2}, 1\\}", "\\{1, 1.41\\}"),
    ("\\left[\\frac{8}{3}, 5\\right)", "(2.667, 5)"),
    ("\\left[\\frac{8}{3}, 5\\right)", "2.67 \\le x < 5"),
    ("(0, \\pi)", "0 < x < 3.14"),
    ("\\begin{pmatrix} \\pi & 1 \\end{pmatrix}", "\\begin{pmatrix} 3.14 & 1 \\end{pmatrix}"),
    ("(1.25, 3.5)", "(1.52, 3.5)"),
    ("(1.25, 3.5)", "(1.250001, 3.5)"),
]


@pytest.mark.parametrize("gold,answer", CONTAINER_MISSES)
def test_attack_near_miss_inside_containers(gold, answer):
    never_correct(boxed(answer), gold)


HEDGES = [  # the gold is each listed answer in turn; hedging between them never pays
    "\\boxed{1} \\boxed{2}",
    "\\boxed{1}\\boxed{2}\\boxed{3}",
    "The answer is 1 or 2.",
    "The answer is $1$ or $2$.",
    boxed("1 \\text{ or } 2"),
    boxed("1, 2"),
    boxed("\\{1, 2\\}"),
    boxed("\\{1\\} \\cup \\{2\\}"),
    boxed("1 \\lor 2"),
    boxed("x = 1 \\text{ or } x = 2"),
    boxed("[1, 2]"),
    boxed("\\pm 1") + " so 1 or -1",
    "It is 1, or maybe 2",
    "\\boxed{1}. Hmm, or \\boxed{2}.",
    "\\boxed{2}. Wait, no: \\boxed{1} or \\boxed{2}.",
    "<answer>1</answer> \\boxed{2}",
    "\\boxed{1} \\fbox{2}",
    "Either $1$ or $2$.",
    "so it is \\frac{2}{2} or 2",
]


@pytest.mark.parametrize("response", HEDGES)
def test_attack_hedge_is_never_rewarded(response):
    for gold in ("1", "2"):
        verdict = vm.verify(response, gold)
        assert verdict.outcome is not Outcome.CORRECT, (gold, response, verdict.detail)


def test_attack_hedge_between_choices_or_texts():
    for gold in ("(B)", "(C)"):
        never_correct("The answer is (B) or (C).", gold)
        never_correct("The correct option is (B) and (C)", gold)
    for gold in ("1:30 pm", "2:30 pm"):  # a reference not readable as maths is compared as text
        never_correct("\\boxed{1:30 pm} \\boxed{2:30 pm}", gold)
    assert vm.verify("\\boxed{1:30 pm}", "1:30 pm").outcome is Outcome.CORRECT


def test_attack_retraction_words_only_move_the_answer_to_the_last_box():
    """A retraction makes the later box the answer: writing one never rewards the earlier box."""
    for response in (
        "\\boxed{1}. Wait, \\boxed{2}",
        "\\boxed{1} (mistake) \\boxed{2}",
        "\\boxed{1} actually \\boxed{2}",
    ):
        assert vm.verify(response, "1").outcome is Outcome.INCORRECT, response
        assert vm.verify(response, "2").outcome is Outcome.CORRECT, response


def test_attack_rounded_copy_adds_nothing():
    """`\\boxed{1/3} \\boxed{0.33}` is a hedge; `\\boxed{\\pi} \\boxed{3.14}` is judged as pi."""
    never_correct("\\boxed{\\frac{1}{3}} \\boxed{0.33}", "0.34")
    never_correct("\\boxed{\\pi} \\boxed{3.14}", "3.15")
    never_correct("\\boxed{3.1416} \\boxed{3.1415}", "3.1416")
    never_correct(boxed("3.14 \\approx \\pi"), "\\pi")  # the first value stated is the answer


HOSTILE = {
    "power_tower": boxed("10^{10^{10}}"),
    "power_tower_plain": boxed("10^10^10"),
    "tetration": boxed("2^{2^{2^{2^{2}}}}"),
    "factorial": boxed("(10^{6})!"),
    "sci": boxed("1e999999999"),
    "tiny_decimal": boxed("3.1416e-9999"),
    "long_decimal": boxed("3." + "1" * 1990),
    "long_pi_bait": boxed("3.1415926535" + "9" * 1980),
    "nested_parens": boxed("(" * 3000 + "2" + ")" * 3000),
    "nested_boxes": "\\boxed{" * 20_000 + "3" + "}" * 20_000,
    "nested_fracs": boxed("\\frac{" * 60 + "1" + "}{2}" * 60),
    "long_sum": boxed("+".join(["1"] * 1500)),
    "giant_answer": boxed("1" * 50_000),
    "many_boxes": " ".join(f"\\boxed{{{i}}}" for i in range(3000)),
    "many_retractions": " wait ".join(f"\\boxed{{{i}}}" for i in range(3000)),
    "matrix_product": boxed(
        "".join(["\\begin{pmatrix}" + "\\\\".join(["&".join(["9"] * 20)] * 20) + "\\end{pmatrix}"] * 6)
    ),
    "set_algebra": boxed("\\cup".join(f"\\{{{i}\\}}" for i in range(200))),
    "spaces": boxed("1" + " 000" * 5000),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_attack_hostile_answer_is_bounded_and_not_correct(name):
    for gold in ("2", "\\pi", "\\frac{1}{3}"):
        never_correct(HOSTILE[name], gold)


def test_no_false_positive_on_either_corpus():
    for name in ("math_corpus.jsonl", "math_corpus_heldout.jsonl"):
        rows = [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]
        false_positives = [
            (r["gold"], r["response"][-80:])
            for r in rows
            if not expected(r) and vm.verify(r["response"], r["gold"]).outcome is Outcome.CORRECT
        ]
        assert not false_positives, (name, false_positives)


def test_heldout_corpus_accuracy_at_least_097():
    rows = [json.loads(line) for line in (DATA / "math_corpus_heldout.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) >= 60
    right = sum((vm.verify(r["response"], r["gold"]).outcome is Outcome.CORRECT) == expected(r) for r in rows)
    assert right / len(rows) >= 0.97


def test_attack_huge_numbers_off_by_one():
    """Relative agreement is no equality: 2^20000 sqrt 2 and 2^20000 sqrt 2 + 1 agree to 6,000 digits."""
    for gold, answer in [
        ("2^{20000}\\sqrt{2}+1", "\\sqrt{2}\\cdot 2^{20000}"),
        ("2^{20000}\\pi-1", "\\pi \\cdot 2^{20000}"),
        ("2^{20000}x+1", "2^{20000}x"),
        ("1.6e9999", "1.5\\times 10^{9999}"),
        ("10^{100}+1", "10^{100}"),
    ]:
        never_correct(boxed(answer), gold)
    assert vm.verify(boxed("1.5\\times 10^{9999}"), "1.5e9999").outcome is Outcome.CORRECT
