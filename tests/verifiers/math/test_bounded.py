"""rlvr.verifiers.math is bounded: hostile answers return within 1 s (also from 16 threads at once),
extraction is linear (200,000 characters of every degenerate run after every trigger phrase),
a *model's* answer that the judge cannot finish in time is `incorrect` ("timeout: ..."), the
grader's own failures (a pool that is down) are `error`, and a worker that misses its deadline or
runs out of memory is killed and replaced. Real worker processes, real SymPy."""

from __future__ import annotations

import math
import pickle
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import rlvr.verifiers.math as vm
from rlvr.verifiers.math import MathOptions
from rlvr.verifiers.math.bounded import PoolError, PoolTimeout, WorkerPool
from rlvr.verifiers.verdict import Outcome

BOUND_S = 1.0

HOSTILE = {
    "power_tower": "\\boxed{10^{10^{10}}}",
    "iterated_power": "\\boxed{2^2^2^2^2^2^2^2^2}",
    "factorial": "\\boxed{(10^{6})!}",
    "root_of_huge": "\\boxed{\\sqrt{10^{4000}+1}}",
    "exp_tower": "\\boxed{e^{e^{e^{e^{10}}}}}",
    "sci_exponent": "\\boxed{1e999999999}",
    "nested_5000": "\\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
    "nested_900": "\\boxed{" + "(" * 900 + "1" + ")" * 900 + "}",
    "long_100k": "\\boxed{" + "1" * 100_000 + "}",
    "long_sum": "\\boxed{" + "+".join(["9^{9999}"] * 150) + "}",
    "thousand_boxes": " ".join(f"\\boxed{{{i}}}" for i in range(1000)),
    "thousand_same_boxes": "\\boxed{5} " * 1000,
    "unions": "\\boxed{" + "\\cup".join(f"({i},{i}.5)" for i in range(120)) + "}",
    "big_set": "\\boxed{\\{" + ",".join(map(str, range(400))) + "\\}}",
    "polynomial": "\\boxed{" + "+".join(f"{i}x^{{{i}}}" for i in range(1, 120)) + "}",
    "unclosed": "\\boxed{" + "{" * 3000,
    "dollars": "$" * 50_001 + " 7",
    "parens_latex": "\\(" * 30_000,
    "phrases": "the answer is " * 8_000,
    "commas": "1," * 50_000,
    "binary_junk": "".join(chr(i % 0x2FF + 1) for i in range(20_000)),
    "answer_then_spaces": "the answer is" + " " * 100_000 + "q",
    "giant_response": "Let me think. " * 400_000 + "So the answer is \\boxed{5}.",
    "span_then_spaces": "The answer is $2$" + " " * 100_000 + "x",
    "repeating_bait": "\\boxed{" + "1" * 1500 + ".1\\overline{3" + "}",
}


pytestmark = pytest.mark.usefixtures("math_pool")  # conftest: one worker pool per module


def timed(response: str, gold: str = "5"):
    start = time.perf_counter()
    verdict = vm.verify(response, gold)
    return verdict, time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_answer_is_bounded(name):
    verdict, elapsed = timed(HOSTILE[name])
    assert elapsed < BOUND_S, f"{name}: {elapsed:.2f} s"
    if name in ("thousand_same_boxes", "giant_response"):  # still the right answer, said at the end
        assert verdict.outcome is Outcome.CORRECT
    else:
        assert verdict.outcome in (Outcome.INCORRECT, Outcome.FORMAT_ERROR), verdict


@pytest.mark.parametrize("name", ["power_tower", "nested_900", "unions", "big_set"])
def test_hostile_gold_is_bounded(name):
    gold = HOSTILE[name][len("\\boxed{") : -1]
    verdict, elapsed = timed("\\boxed{5}", gold)
    assert elapsed < BOUND_S and verdict.outcome is Outcome.INCORRECT
    same, elapsed = timed(HOSTILE[name], gold)  # an identical answer is still recognised
    assert elapsed < BOUND_S and same.outcome is Outcome.CORRECT


def test_hostile_inputs_from_16_threads_at_once():
    jobs = list(HOSTILE.values()) * 2 + ["\\boxed{\\frac{1}{2}}"] * 16

    def run(response):
        return timed(response, "\\frac12")

    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(run, jobs))
    slow = [(r[0].detail, t) for r, t in zip(results, [r[1] for r in results]) if t >= BOUND_S]
    assert not slow, slow
    assert all(v.outcome is Outcome.CORRECT for v, _ in results[-16:])


def test_slow_answer_times_out_into_incorrect_not_error():
    """A model's answer that the judge cannot finish within the deadline scores 0 as `incorrect`
    with its reason: an `error` would be left out of training, so being slow would dodge the 0."""
    slow = "\\boxed{" + "+".join(f"{i}x^{{{i}}}" for i in range(1, 150)) + "}"
    verdict = vm.verify(slow, "x", MathOptions(timeout_s=0.01))
    assert (verdict.outcome, verdict.score) == (Outcome.INCORRECT, 0.0) and verdict.detail.startswith("timeout:")
    vm.warm_up()  # the killed worker's replacement is ready again
    sines = "+".join(f"\\sin(10^{{{9999 - i}}})" for i in range(48))
    for response in (f"\\boxed{{{sines}}}", f"\\boxed{{\\{{{sines}, {sines}-1, {sines}-2\\}}}}"):
        start = time.perf_counter()
        verdict = vm.verify(response, "1")
        assert time.perf_counter() - start < BOUND_S + 0.5
        assert verdict.outcome is Outcome.INCORRECT and verdict.score == 0.0, verdict.detail
        vm.warm_up()
    assert vm.verify("\\boxed{2}", "2.0").outcome is Outcome.CORRECT


def test_grader_failure_is_an_error(monkeypatch):
    """A pool that cannot run the job (here: a real pool, closed) is the grader's failure: `error`."""
    from rlvr.verifiers.math import api

    pool = WorkerPool(1, memory_mb=None)
    pool.close()
    monkeypatch.setattr(api, "default_pool", lambda: pool)
    verdict = vm.verify("\\boxed{\\frac{2}{4}}", "\\frac12")
    assert verdict.outcome is Outcome.ERROR and "grader failed" in verdict.detail


TRIGGERS = [
    "Final answer",
    "**Final Answer**",
    "The answer is",
    "Answer:",
    "answer",
    "\\boxed{",
    "$",
    "<answer>",
    "The answer is not",
    "or",
    "Wait, no,",
    "x =",
    "\\(",
    "The answer is 2. No,",
    "it is certainly not",
]
RUNS = [
    " ",
    "\t",
    "\n",
    " \t\n",
    "\u00a0",
    "**",
    "Final answer",
    "the answer is ",
    "$",
    "\\boxed{",
    "1,000",
    "1 000",
    "1,",
    "12 345 ",
    " or ",
    "not ",
    "wait ",
    "(",
    "\\(",
    "{",
    ".",
    "-",
    "=",
    "5 or ",
    "A1",
    "$5$ ",
    "\\boxed{5} ",
    " is not 5,",
    "answer: ",
]


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_extraction_is_linear_on_200k_degenerate_runs(trigger):
    """200,000 characters of each degenerate run after each trigger phrase (no newline at the end):
    the answer search in the calling thread takes well under a second of CPU (about 0.1 s on an
    idle machine; it was 246 s for "Final answer" and 1,000 spaces), and the whole call stays
    within the deadline."""
    from rlvr.verifiers.math.final_answer import extract

    slow = []
    for run in RUNS:
        text = trigger + (run * (200_000 // len(run) + 1))[:200_000]
        start = time.thread_time()  # CPU time of this thread: what holds the GIL, whatever the load
        extract(text)
        if time.thread_time() - start > 0.5:
            slow.append((run, round(time.thread_time() - start, 2)))
    assert not slow, slow
    for run in (" ", "\\boxed{5} ", "1,"):
        verdict, elapsed = timed(trigger + run * (200_000 // len(run)))
        assert elapsed < BOUND_S + 0.5, (run, elapsed)
        assert verdict.outcome is not Outcome.ERROR, verdict.detail


def test_pool_kills_and_replaces_a_worker_past_its_deadline():
    with WorkerPool(1, memory_mb=None) as pool:
        pool.warm_up()
        start = time.monotonic()
        with pytest.raises(PoolTimeout):
            pool.run(time.sleep, (30,), timeout=0.3)
        assert time.monotonic() - start < 1.0
        assert pool.run(math.factorial, (10,), timeout=30) == 3628800  # a fresh worker answers


def test_worker_memory_blowup_is_contained():
    with WorkerPool(1, memory_mb=1024) as pool:
        with pytest.raises(PoolError, match="MemoryError"):
            pool.run(bytearray, (4 * 2**30,), timeout=30)
        assert pool.run(math.gcd, (12, 18), timeout=30) == 6  # the worker survived


def test_callable_off_the_main_thread_and_envs_stay_picklable():
    from rlvr.envs.tasks.arithmetic import ArithmeticEnv

    with ThreadPoolExecutor(4) as ex:
        outcomes = list(ex.map(lambda a: vm.verify(f"\\boxed{{{a}}}", "12").outcome, ["12", "12.0", "13", "1.2e1"]))
    assert outcomes == [Outcome.CORRECT, Outcome.CORRECT, Outcome.INCORRECT, Outcome.CORRECT]
    env = ArithmeticEnv(difficulty=5)
    task = env.make_task(3)
    assert env.verify(task, task.reference).outcome is Outcome.CORRECT
    assert env.verify(task, task.wrong).outcome is Outcome.INCORRECT
    assert pickle.loads(pickle.dumps(env)).verify(task, task.reference).score == 1.0


def test_a_crash_only_an_answer_brings_is_that_answers_zero_not_an_error(monkeypatch):
    """judge_job charges a judge crash to the answer when the reference alone judges fine (a model's
    text never makes an `error`, which training leaves out), and to the grader when the reference
    crashes it too. The crash is injected into the comparison, in this process (no worker)."""
    import sympy

    from rlvr.verifiers.math import grade

    real_same = grade.same

    def crashes_on_seven(g, a, o):
        if getattr(a, "value", None) == sympy.Integer(7):
            raise ZeroDivisionError("injected")
        return real_same(g, a, o)

    monkeypatch.setattr(grade, "same", crashes_on_seven)
    options = MathOptions(isolate=False)
    correct, detail = grade.judge_job("5", ("7",), options)
    assert correct is False and "ZeroDivisionError" in detail and "scored wrong" in detail
    assert grade.judge_job("7", ("7",), options)[0] is None  # the reference itself crashes: the grader's failure
    assert grade.judge_job("5", ("5",), options) == (True, "'5' matches the reference")
