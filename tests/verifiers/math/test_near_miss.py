"""rlvr.verifiers.math on the near-miss corpus (tests/data/math_near_miss.jsonl, issue #27): wrong answers
that look right (categories `fp_*`: negation, retraction, hedges, false statements, units, percent and
degree markers, truncation for a decimal gold, sets vs intervals, functions that agree on small |x|,
digits in words, padding, sign, off-by-one, swapped order, wrong variable, dropped plus/minus) and
right answers in the forms real datasets use (`tp_*`: thousands separators, inequalities vs
intervals, labelled golds, plain-text constants, compatible units, LaTeX variants, equivalent forms).
Each of its five batches (lines 1-258, 259-394, 395-484, 485-547, 548-594) was written and
committed before the verifier ran on it. Rules checked:
- no false positive at all: a reward for a wrong answer is what an RL policy learns to produce;
- recall on the right answers at least RECALL_FLOOR (the level reached when the corpus was added;
  raise it as the verifier improves, never lower it to make a change pass);
- bounded time: every call well under a second or two, the whole corpus well under a minute.
Real SymPy in real worker processes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.verdict import Outcome
from tests.verifiers.math.corpora import KEYS, LENIENT, OPTIONAL_KEYS, expected

CORPUS = Path(__file__).resolve().parents[2] / "data" / "math_near_miss.jsonl"
RECALL_FLOOR = 1.0  # issue 38: all 197 right answers that carry a marker (issue 27 ended at 225 of 226; the miss,
#                      gold 0.57 for 4/7, is right since a 2-digit gold is rounded to). The 29 rows marked
#                      `lenient_only` are right unmarked answers: paid only with require_marker=False (tested below).
#                      A call takes <= 15 ms against the 0.8 s deadline: a slow machine costs no right answer.
WORST_CALL_S = 5.0  # generous: a call takes milliseconds; this catches a stall, not a slow machine
WHOLE_CORPUS_S = 60.0

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


def load() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def judged() -> list[tuple[int, dict, bool, float]]:
    """(line number, row, called correct, seconds) for every line, verified once for the module."""
    out = []
    for number, row in enumerate(load(), start=1):
        start = time.perf_counter()
        verdict = vm.verify(row["response"], row["gold"])
        out.append((number, row, verdict.outcome is Outcome.CORRECT, time.perf_counter() - start))
    return out


def test_corpus_shape():
    """At least 140 pairs, 90 wrong and 50 right; a category's prefix agrees with its label."""
    rows = load()
    assert len(rows) >= 140
    assert sum(not r["expected"] for r in rows) >= 90
    assert sum(r["expected"] for r in rows) >= 50
    for row in rows:
        assert KEYS <= set(row) <= KEYS | OPTIONAL_KEYS, row
        assert row["category"].startswith("tp_" if row["expected"] else "fp_"), row


def test_no_false_positive(judged):
    false_positives = [
        (n, r["category"], r["gold"], r["response"][-80:]) for n, r, ok, _ in judged if ok and not expected(r)
    ]
    assert not false_positives, false_positives


def test_unmarked_right_answers_are_paid_only_in_lenient_mode(judged):
    """Issue 38: an answer needs a marker; the lenient mode reads the unmarked ones as before."""
    rows = [r for _, r, _, _ in judged if r.get("lenient_only")]
    assert len(rows) == 29
    refused = [
        r["response"][-60:] for r in rows if vm.verify(r["response"], r["gold"], LENIENT).outcome.value != "correct"
    ]
    assert not refused, refused


def test_recall_floor(judged):
    positives = [(n, r, ok) for n, r, ok, _ in judged if expected(r)]
    recall = sum(ok for _, _, ok in positives) / len(positives)
    missed = [(n, r["category"], r["gold"], r["response"][-60:]) for n, r, ok in positives if not ok]
    assert recall >= RECALL_FLOOR, (recall, missed)


def test_bounded_time(judged):
    slowest = max(judged, key=lambda item: item[3])
    assert slowest[3] < WORST_CALL_S, (slowest[0], slowest[1]["response"][-80:], slowest[3])
    assert sum(seconds for *_, seconds in judged) < WHOLE_CORPUS_S
