"""Forges of the values a program returns (issue #26.3), submitted through the real environment
(`rlvr/Code-v0`) and `verifiers.code.verify` with the real Docker sandbox:
- exact ints: a float near an int answer (or equal to it), Binet's float formula for `fib(100)`,
  `isqrt` returning `1e9 + 0.5`, dict keys that collapse in JSON (`{1: 99, '1': 2}`);
- overflow: `10**400` where a float is expected must score 0, not crash the step (a crash is an
  `error` episode, which training leaves out: a wrong answer would dodge its 0);
- hash floods: sets and dicts of ints that all hash alike, forged straight into the result pipe
  (no time spent building them), and a plain list of them fed to test code that calls `set()`.
Each class: a correct program still passes; the hostile value scores 0 with a typed reason;
the verdict comes quickly (generous bounds; before the fix these took minutes)."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs.tasks.code import fenced
from rlvr.verifiers import code
from rlvr.verifiers.verdict import Outcome

MERSENNE = 2**61 - 1  # ints hash modulo this prime: all its multiples hash to 0
FIB_100 = 354224848179261915075
# Walks the frames up to the harness's reporting closure (see tests/verifiers/code/test_forge.py): a program
# can write any text as its "values", without building the value.
FORGE_REPORT = """
import os, sys
M = 2**61 - 1
def _report(text):
    f = sys._getframe()
    while f is not None and 'report' not in f.f_locals:
        f = f.f_back
    f.f_locals['report']('values', '[' + text + ']')
    os._exit(0)
"""


def flood(fn: str, kind: str, n: int) -> str:
    """A program whose function `fn` reports n colliding ints as an encoded set or dict."""
    member = "str(k * M)" if kind == "set" else "'[%d,0]' % (k * M)"
    tag = "s" if kind == "set" else "d"
    return (
        FORGE_REPORT + f"def {fn}(*args):\n"
        f"    _report('{{\"{tag}\":[' + ','.join({member} for k in range(1, {n + 1})) + ']}}')\n"
    )


@pytest.fixture(scope="module")
def env(box):
    made = gym.make("rlvr/Code-v0", scoring="fraction", timeout_s=2.0, sandbox=box).unwrapped
    yield made
    made.close()


def submit(env, task_id: str, program: str, response: str | None = None):
    env.reset(options={"task_id": task_id})
    _, reward, terminated, _, info = env.step(fenced(program) if response is None else response)
    assert terminated
    return reward, info["verdict"]


def statuses(verdict) -> list[str]:
    return [t["status"] for t in verdict.info["tests"]]


def reference(env, task_id: str) -> str:
    """The task's reference response (a fenced program)."""
    return next(t.reference for t in env.tasks if t.task_id == task_id)


# ---- exact ints ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "task_id, program",
    [
        # within a relative 1e-9 of every expected factorial (the old tolerance): each one is wrong
        ("factorial", "import math\ndef factorial(n):\n    return float(math.factorial(n)) * (1 + 5e-10)\n"),
        # 1e9 off 20!: passed before
        ("factorial", "import math\ndef factorial(n):\n    return math.factorial(n) + (1e9 if n >= 20 else 0.4)\n"),
    ],
    ids=["relative 5e-10", "1e9 off 20!"],
)
def test_a_float_near_an_int_answer_scores_zero(env, task_id, program):
    reward, verdict = submit(env, task_id, program)
    assert reward == 0.0 and verdict.outcome is Outcome.INCORRECT, verdict.detail
    assert set(statuses(verdict)) == {"wrong_answer"}, verdict.info["tests"]
    call_details = [t["detail"] for t in verdict.info["tests"] if t["kind"] == "call"]
    assert call_details and all("ints compare exactly" in d for d in call_details), call_details


def test_a_float_equal_to_an_int_answer_fails_its_call_tests(env):
    # math.gamma(21) is exactly 20! as a float; an int is expected, and ints cross as exact ints.
    reward, verdict = submit(env, "factorial", "import math\ndef factorial(n):\n    return math.gamma(n + 1)\n")
    calls = [t for t in verdict.info["tests"] if t["kind"] == "call"]
    assert calls and all(t["status"] == "wrong_answer" for t in calls), calls
    assert reward < 1.0 and verdict.outcome is Outcome.INCORRECT


@pytest.mark.parametrize("task_id", ["factorial", "celsius_to_fahrenheit"])
def test_correct_programs_still_pass(env, task_id):
    # celsius_to_fahrenheit expects floats (36.6 * 9 / 5 + 32 is 97.88000000000001): the default tolerance
    reward, verdict = submit(env, task_id, "", response=reference(env, task_id))
    assert reward == 1.0 and verdict.outcome is Outcome.CORRECT, verdict.detail


def test_an_int_answer_passes_a_float_expectation_of_equal_value(env):
    program = "def celsius_to_fahrenheit(c):\n    v = c * 9 / 5 + 32\n    return int(v) if v == int(v) else v\n"
    reward, verdict = submit(env, "celsius_to_fahrenheit", program)
    assert reward == 1.0, verdict.info["tests"]


BINET = "def fib(n):\n    phi = (1 + 5 ** 0.5) / 2\n    return round(phi ** n / 5 ** 0.5)\n"
EXACT_FIB = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
FIB_TESTS = [code.CallTest("fib", (10,), 55), code.CallTest("fib", (100,), FIB_100)]
ISQRT_TESTS = [code.CallTest("isqrt", (10**18,), 10**9), code.CallTest("isqrt", (99,), 9)]


@pytest.mark.parametrize(
    "program, tests, want",
    [
        (EXACT_FIB, FIB_TESTS, ["passed", "passed"]),
        (BINET, FIB_TESTS, ["passed", "wrong_answer"]),  # Binet's float formula is exact up to fib(70) only
        ("import math\ndef isqrt(n):\n    return math.isqrt(n)\n", ISQRT_TESTS, ["passed", "passed"]),
        (
            "import math\ndef isqrt(n):\n    return math.sqrt(n) + 0.5 if n > 100 else math.isqrt(n)\n",
            ISQRT_TESTS,
            ["wrong_answer", "passed"],
        ),
        # keys that collapse in JSON: the program would pick which value survives
        ("def f():\n    return {1: 99, '1': 2}\n", [code.CallTest("f", (), {"1": 2})], ["wrong_answer"]),
        ("def f():\n    return {1: 2}\n", [code.CallTest("f", (), {"1": 2})], ["passed"]),
        # an opted-in tolerance covers ints too
        (
            "import math\ndef isqrt(n):\n    return math.sqrt(n)\n",
            [code.CallTest("isqrt", (10**18,), 10**9, rel_tol=1e-9)],
            ["passed"],
        ),
    ],
    ids=["exact fib", "Binet", "exact isqrt", "isqrt + 0.5", "keys collapse", "keys distinct", "opted-in tolerance"],
)
def test_exact_ints_through_verify(box, program, tests, want):
    verdict = code.verify(fenced(program), tests, box, scoring="fraction")
    assert statuses(verdict) == want, verdict.info["tests"]
    if "wrong_answer" in want:
        assert verdict.outcome is Outcome.INCORRECT


def test_keys_that_collapse_are_named_in_the_verdict(box):
    verdict = code.verify(fenced("def f():\n    return {1: 99, '1': 2}\n"), [code.CallTest("f", (), {"1": 2})], box)
    assert verdict.score == 0.0 and "both '1' in JSON" in verdict.info["tests"][0]["detail"]


# ---- overflow -------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["10**400", "-10**400", "10**4000", "[10**400]"])
def test_a_huge_int_where_a_float_is_expected_scores_zero_not_error(env, value):
    reward, verdict = submit(env, "celsius_to_fahrenheit", f"def celsius_to_fahrenheit(c):\n    return {value}\n")
    assert reward == 0.0 and verdict.outcome is Outcome.INCORRECT, verdict.detail
    assert set(statuses(verdict)) == {"wrong_answer"}


def test_a_huge_int_in_host_side_checks_is_a_runtime_error(box):
    tests = [code.AssertTest("import math\nassert math.isclose(f(), 1.0)")]
    verdict = code.verify(fenced("def f():\n    return 10**400\n"), tests, box)
    assert verdict.outcome is Outcome.INCORRECT and statuses(verdict) == ["runtime_error"], verdict.info["tests"]
    assert "OverflowError" in verdict.info["tests"][0]["detail"]


# ---- hash floods ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["set", "dict"])
def test_colliding_sets_and_dicts_in_an_environment_are_refused_quickly(env, kind):
    # 20,000 colliding members in each of the task's 10 tests (about 450 KB each, under the output
    # caps): before, about 5 s of the trainer's CPU per test, and 23-32 s at the 1 MiB cap.
    start = time.monotonic()
    reward, verdict = submit(env, "remove_duplicates", flood("remove_duplicates", kind, 20_000))
    elapsed = time.monotonic() - start
    assert reward == 0.0 and verdict.outcome is Outcome.INCORRECT, verdict.detail
    assert set(statuses(verdict)) == {"invalid_value"}, verdict.info["tests"]
    assert all("share a hash value" in t["detail"] for t in verdict.info["tests"])
    assert elapsed < 30, elapsed  # about 3 s, most of it the sandbox's


# Room for 100,000 colliding ints (about 2.4 MB encoded, 3.8 MB as pairs), and time to build them on a busy machine.
BIG_VALUES = code.RunSettings(output_cap=4 << 20, fail_fast=False, timeout_s=15)
M_LIST = "M = 2**61 - 1\ndef f(n):\n    return [k * M for k in range(1, 100_001)]\n"


@pytest.mark.parametrize(
    "name, program, test",
    [
        ("set", flood("f", "set", 100_000), code.CallTest("f", (1,), [1])),
        ("dict", flood("f", "dict", 100_000), code.CallTest("f", (1,), {"1": 0})),
        ("list fed to set()", M_LIST, code.AssertTest("assert set(f(1)) == {1}")),
        ("list fed to dict()", M_LIST.replace("[k * M", "[(k * M, 0)"), code.AssertTest("assert len(dict(f(1))) == 1")),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else "",
)
def test_a_hundred_thousand_colliding_ints_are_judged_quickly(box, name, program, test):
    start = time.monotonic()
    verdict = code.verify(fenced(program), [test], box, settings=BIG_VALUES)
    elapsed = time.monotonic() - start
    assert verdict.score == 0.0 and verdict.outcome is Outcome.INCORRECT, (name, verdict.detail)
    assert statuses(verdict) == ["invalid_value"], (name, verdict.info["tests"])
    assert "share a hash value" in verdict.info["tests"][0]["detail"]
    assert elapsed < 30, (name, elapsed)  # about 2 s; before: minutes of the trainer's CPU


def test_values_with_a_few_shared_hashes_still_pass(box):
    # Honest data shares a hash now and then (-1 and -2; 0.5 and 2**60; a few multiples of 2**61 - 1).
    few = [k * MERSENNE for k in range(1, 9)]
    program = (
        f"def f():\n    return {{-1, -2, 0.5, 2**60, *{few!r}}}\n"
        f"def g():\n    return {few!r} * 3\n"
        f"def h():\n    return {{k: str(k) for k in {few!r}}}\n"
    )
    expected_set = "{" + ", ".join(map(str, [-1, -2, 0.5, 2**60, *few])) + "}"
    tests = [
        code.AssertTest(f"assert f() == {expected_set}"),
        code.AssertTest(f"assert set(g()) == set({few!r})"),
        code.CallTest("h", (), {str(k): str(k) for k in few}),
    ]
    verdict = code.verify(fenced(program), tests, box, scoring="fraction")
    assert verdict.score == 1.0, verdict.info["tests"]


def test_colliding_values_in_test_code_the_judge_runs_cost_the_programs_time_only(box):
    # Test code the host cannot convert (a loop) runs in the harness's judge, in the sandbox: its
    # set() of colliding values is bounded by the test's own time limit, not the trainer's CPU.
    program = M_LIST
    settings = code.RunSettings(output_cap=4 << 20, fail_fast=False, timeout_s=3)
    start = time.monotonic()
    verdict = code.verify(
        fenced(program), [code.AssertTest("for _ in [0]:\n    assert set(f(1)) == {1}")], box, settings=settings
    )
    assert verdict.score == 0.0 and statuses(verdict) == ["timeout"], verdict.info["tests"]
    assert time.monotonic() - start < 30
