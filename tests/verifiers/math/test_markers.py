"""The extraction proper (verifiers/math/markers.py): where a response marks an answer and the raw text
that stands there, before the final-answer grammar (final_answer.py) decides which one is final.
Pure string functions: no worker pool."""

from __future__ import annotations

import pytest

from rlvr.verifiers.math.markers import (
    after_think,
    answer_tag,
    box_spans,
    configured,
    distinct,
    extract_gold,
    fenced,
    find_boxes,
    phrase_answer,
)
from rlvr.verifiers.math.words import CORRECTION_RE, TAKEN_BACK_RE, WEAK_RETRACTION_RE


def test_boxes_in_order_with_their_places():
    text = "so \\boxed{3}, then \\fbox{ 4 } and \\boxed 5 again \\boxed{3}"
    spans, unclosed, too_many = box_spans(text, 16)
    assert [c for c, _, _ in spans] == ["3", "4", "5", "3"]
    assert not unclosed and not too_many
    assert all(text[start:end].startswith(("\\boxed", "\\fbox")) for _, start, end in spans)
    assert find_boxes(text, 16) == (["3", "4", "5"], False, False)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("\\boxed{\\boxed{5}}", (["5"], False, False)),  # a box that is all of another is one box
        ("\\boxed{\\frac{1}{2}}", (["\\frac{1}{2}"], False, False)),
        ("\\boxed{a \\} b}", (["a \\} b"], False, False)),  # an escaped brace does not close it
        ("\\boxed{5", ([], True, False)),  # never closed: truncated
        ("\\boxed{1} \\boxed{2} \\boxed{3}", (["1", "2"], False, True)),  # over the cap: a hedge
        ("\\boxed{ } \\boxed{7}", (["7"], False, False)),  # an empty box is no box
    ],
)
def test_box_edge_cases(text, found):
    assert find_boxes(text, 2) == found


def test_distinct_ignores_whitespace_and_keeps_order():
    assert distinct(["x + 1", "2", "x+1", " 2 "]) == ["x + 1", "2"]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("So the answer is 42.", "42"),
        ("**Answer:** 7 because 3 + 4 = 7", "7"),
        ("The answers are $2$ or $-2$.", "2 \\text{ or } -2"),  # joined spans are one region
        ("Final Answer\n\n12 apples", "12 apples"),  # a heading: the answer is on the next line
        ("Option = B; done", "B"),
        ("there is no way the answer is 6", ""),  # a denied phrase: its answer is empty
    ],
)
def test_phrase_answers(text, answer):
    found = phrase_answer(text)
    assert found is not None and found[0] == answer


def test_no_phrase_without_a_verb_colon_or_heading():
    assert phrase_answer("my answer was slow") is None
    assert phrase_answer("no marker at all: 5") is None


def test_the_answer_phrase_scan_is_linear():
    assert phrase_answer("Final answer" + " " * 100_000) is None  # the old pattern took minutes on this


def test_fences_tags_and_thinking():
    assert fenced("Answer:\n```\n42\n```") == "Answer:\n42\n"  # a fenced block right after a marker
    assert fenced("```python\nanswer = 6 * 7\n```").strip() == ""  # any other block is code
    assert answer_tag("x <answer>5</answer> tail") == ("5", " tail")
    assert answer_tag("<ANSWER>5") == ("5", "")
    assert answer_tag("none") is None
    assert after_think("<think>2</think> 3") == " 3"
    assert after_think("<think>2</think>  ") == "<think>2</think>  "  # nothing after: all of it


def test_configured_patterns_take_the_last_match():
    assert configured("Result: 3 ... Result: 4", (r"Result: (\S+)",)) == "4"
    assert configured("nothing", (r"Result: (\S+)",)) is None


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("so it is \\boxed{12}.", "12"),
        ("\\boxed{1} and \\boxed{2}", "1, 2"),
        ("$\\frac{1}{2}$", "\\frac{1}{2}"),
        (" 3/4 ", "3/4"),
    ],
)
def test_the_gold_answer(gold, answer):
    assert extract_gold(gold) == answer


def test_the_take_back_word_classes():
    assert CORRECTION_RE.search("\\boxed{3}. Wait, let me recompute")  # between two boxes: a self-correction
    assert WEAK_RETRACTION_RE.search("The answer is 2. Actually, no")
    assert not WEAK_RETRACTION_RE.search("let me recheck: 2*3 = 6")  # checking work takes nothing back
    assert TAKEN_BACK_RE.search("was 20, but that was wrong")
    assert not TAKEN_BACK_RE.search("the answer is 20, which is right")
