"""rlvr.verifiers.format (shape checks) and verifiers.compose (weighted reward composition)."""

from __future__ import annotations

import pickle

import pytest

import rlvr.verifiers.math as vm
from rlvr import verifiers
from rlvr.verifiers.compose import weighted
from rlvr.verifiers.format import Boxed, Tags, boxed_present, has_tags, within_length
from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError

GOOD = "<think>2 + 2 = 4</think>\n<answer>\\boxed{4}</answer>"


pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


@pytest.mark.parametrize(
    "response,why",
    [
        ("<answer>4</answer><think>x</think>", "out of order"),
        ("<think>x</think>", "missing <answer>"),
        ("<think>x</think><answer>  </answer>", "empty"),
        ("<think>x</think><answer>4</answer><answer>5</answer>", "more than once"),
        ("<think>x<answer>4</answer>", "missing <think>"),
    ],
)
def test_has_tags_rejects_with_reason(response, why):
    v = has_tags(response, ["think", "answer"])
    assert (v.score, v.outcome) == (0.0, Outcome.FORMAT_ERROR) and why in v.detail


def test_has_tags_accepts_and_options():
    assert has_tags(GOOD).outcome is Outcome.CORRECT and has_tags(GOOD).score == 1.0
    assert has_tags("<answer>4</answer><think>x</think>", ["think", "answer"], in_order=False).score == 1.0
    assert has_tags("<a>1</a><a>2</a>", ["a"], exactly_once=False).score == 1.0
    with pytest.raises(VerifierError):
        has_tags(GOOD, "think")  # a string is not a list of tags
    with pytest.raises(VerifierError):
        has_tags(GOOD, ["<think>"])
    with pytest.raises(TypeError):
        has_tags(None, ["think"])


def test_boxed_and_length_checks():
    assert boxed_present("so \\boxed{3}").score == 1.0
    assert boxed_present("so \\boxed{3").outcome is Outcome.FORMAT_ERROR
    assert boxed_present("no box here").outcome is Outcome.FORMAT_ERROR
    assert boxed_present("\\boxed{3} \\boxed{4}", exactly_one=True).outcome is Outcome.FORMAT_ERROR
    assert boxed_present("\\boxed{3} \\boxed{3}", exactly_one=True).score == 1.0
    assert within_length("abc", 3).score == 1.0 and within_length("abcd", 3).score == 0.0
    with pytest.raises(VerifierError):
        within_length("abc", 0)


def test_weighted_reports_every_component_and_follows_primary():
    reward = weighted({"correct": (vm.verify, 1.0), "format": (Tags(), 0.5), "boxed": (Boxed(), 0.5)})
    v = reward(GOOD, "4")
    assert v.score == 1.0 and v.outcome is Outcome.CORRECT
    assert set(v.info["components"]) == {"correct", "format", "boxed"}
    wrong = reward("\\boxed{5}", "4")  # wrong answer, no tags, a box: (0*1 + 0*0.5 + 1*0.5) / 2
    assert wrong.score == pytest.approx(0.25) and wrong.outcome is Outcome.INCORRECT
    assert wrong.info["components"]["format"]["outcome"] == "format_error"
    assert wrong.info["components"]["boxed"] == {**wrong.info["components"]["boxed"], "score": 1.0, "weight": 0.5}
    named = weighted({"format": (Tags(), 1.0), "correct": (vm.verify, 1.0)}, primary="correct")
    assert named("\\boxed{4}", "4").outcome is Outcome.CORRECT and named("\\boxed{4}", "4").score == 0.5


def _crash(response: str, gold: str) -> Verdict:
    raise ZeroDivisionError("grader bug")


def _grader_error(response: str, gold: str) -> Verdict:
    return Verdict(0.0, Outcome.ERROR, "sandbox unavailable")


def test_an_error_in_any_component_is_an_error():
    for bad in (_crash, _grader_error):
        v = weighted({"correct": (vm.verify, 1.0), "other": (bad, 0.1)})(GOOD, "4")
        assert (v.score, v.outcome) == (0.0, Outcome.ERROR) and "other" in v.detail
        assert v.info["components"]["correct"]["outcome"] == "correct"


def test_weighted_validates_and_pickles():
    for bad in (
        {},
        {"a": (vm.verify,)},
        {"a": (vm.verify, -1.0)},
        {"a": (vm.verify, float("nan"))},
        {"a": (vm.verify, 0.0)},
        {"": (vm.verify, 1.0)},
    ):
        with pytest.raises(VerifierError):
            weighted(bad)
    with pytest.raises(TypeError):
        weighted({"a": ("not callable", 1.0)})
    with pytest.raises(VerifierError):
        weighted({"a": (vm.verify, 1.0)}, primary="b")
    reward = pickle.loads(pickle.dumps(verifiers.weighted({"correct": (vm.verify, 2), "format": (Tags(), 1)})))
    assert reward(GOOD, "4").score == 1.0
    with pytest.raises(TypeError):
        reward(b"bytes", "4")
