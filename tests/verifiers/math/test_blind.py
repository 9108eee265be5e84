"""rlvr.verifiers.math on the blind corpus (tests/data/math_blind.jsonl, issue 38): 423 labelled
answers written by someone who had not read the verifier or its tests, committed (e676606) before
the verifier ran on them, by the classes the issue names (markers, unmarked prose, noise numbers,
supersession, words in the region, units, angles, denials and hedges in several languages, spelled
numbers, special answers, Unicode forms, code fences, decimals, expressions, realistic small-model
outputs). The issue's bar: no false positive, no `error`, recall at least 0.95.

The misses (4 of 206) are labels that contradict a stated policy, kept as they were written:
`0.667`, `0.6666` for gold 0.67 and `0.333` for 0.33 (two decimals are equal only as decimals,
`decimals` rule 1: 2.7182 is not 2.718 in the held-out corpus) and `25\\%` for gold 25 (a percent
answer means its value, 0.25: `equivalence._readings`). Real SymPy in real worker processes."""

from __future__ import annotations

import time

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.verdict import Outcome
from tests.verifiers.math.corpora import KEYS, load

RECALL_FLOOR = 0.95  # the bar; measured 202 of 206 (0.981) when the grammar landed
WHOLE_CORPUS_S = 60.0

pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


@pytest.fixture(scope="module")
def judged() -> list[tuple[dict, Outcome]]:
    start = time.monotonic()
    out = [(row, vm.verify(row["response"], row["gold"]).outcome) for row in load("math_blind.jsonl")]
    assert time.monotonic() - start < WHOLE_CORPUS_S
    return out


def test_shape():
    rows = load("math_blind.jsonl")
    assert len(rows) >= 300 and all(set(r) == KEYS for r in rows)
    assert len({r["category"] for r in rows}) >= 15
    assert sum(r["expected"] for r in rows) >= 150 and sum(not r["expected"] for r in rows) >= 150


def test_no_false_positive_and_no_error(judged):
    false_positives = [
        (r["category"], r["gold"], r["response"][-80:]) for r, o in judged if o is Outcome.CORRECT and not r["expected"]
    ]
    errors = [(r["category"], r["response"][-80:]) for r, o in judged if o is Outcome.ERROR]
    assert not false_positives, false_positives
    assert not errors, errors


def test_recall_floor(judged):
    positives = [(r, o) for r, o in judged if r["expected"]]
    missed = [(r["category"], r["gold"], r["response"][-60:]) for r, o in positives if o is not Outcome.CORRECT]
    assert 1 - len(missed) / len(positives) >= RECALL_FLOOR, missed
