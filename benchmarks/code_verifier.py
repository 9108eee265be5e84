r"""Code verifier speed: how many tests per second `verifiers.code.verify` gets through the warm
sandbox pool, batched (many tests in one sandbox call, the default) against one test per call,
a HumanEval-shaped test that only the harness's judge can run (its `check` has a loop, a helper
and a comprehension: 17 calls of the program by proxy), and the whole rlvr/Code-v0 reference
sweep from several threads. One run prints one table.

    python -m benchmarks.code_verifier [--repeats 20] [--threads 4]     (from the repository root)

`ms/test` is the row's wall time over its tests: the column to compare across versions whose tasks
hold different numbers of tests (Code-v0 runs about 10 a task since issue #26, 4 before). To compare
with an older tree that imports bare names (8c5c807): `git worktree add /tmp/base8c 8c5c807`, then
`sed -e 's/^from rlvr import sandbox/import sandbox/' -e 's/^from rlvr\.\(envs\|verifiers\)/from \1/'
benchmarks/code_verifier.py > /tmp/cv_old.py` and, from /tmp, `PYTHONPATH=/tmp/base8c python /tmp/cv_old.py`
(it builds its own sandbox image on first use), alternating runs of the two.

Targets (on a quiet 2-core machine): batched >= 100 tests/s from one thread, i.e. a per-test
cost under 10 ms, and batching at least 3x faster than one sandbox call per test."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr import sandbox
from rlvr.envs.tasks.code import CodeEnv
from rlvr.verifiers import code
from rlvr.verifiers.verdict import Outcome

PROGRAM = (
    "```python\nimport sys\ndef add(a, b):\n    return a + b\nif __name__ == '__main__':\n"
    "    print(add(*map(int, sys.stdin.read().split())))\n```"
)
TARGET_TESTS_PER_S, TARGET_BATCH_SPEEDUP = 100.0, 3.0
# HumanEval-shaped: a `check(candidate)` with a loop, a helper and a comprehension, which the
# host-side converter does not take: the test code runs in the judge, calling the program by proxy.
HUMANEVAL_PROGRAM = "```python\ndef rotate(s, k):\n    k %= max(len(s), 1)\n    return s[k:] + s[:k]\n```"
HUMANEVAL_TEST = """
def _reference(s, k):
    k %= max(len(s), 1)
    return s[k:] + s[:k]

def check(candidate):
    for k in range(12):
        assert candidate("abcdefg", k) == _reference("abcdefg", k)
    assert all(candidate(w, len(w)) == w for w in ["", "a", "ab", "abc"])
    assert candidate("", 3) == ""

check(rotate)
"""


def make_tests(n: int) -> list[code.Test]:
    kinds = [
        lambda i: code.IOTest(f"{i} {i}", f"{2 * i}"),
        lambda i: code.CallTest("add", (i, 1), i + 1),
        lambda i: code.AssertTest(f"assert add({i}, -{i}) == 0"),
    ]
    return [kinds[i % 3](i) for i in range(n)]


@dataclass(frozen=True)
class Row:
    method: str
    tests: int
    calls: int
    seconds: float
    median_ms: float

    @property
    def tests_per_s(self) -> float:
        return self.tests / self.seconds


def timed_verifications(method: str, jobs: list[tuple[str, list]], box, threads: int = 1, **kwargs) -> Row:
    latencies: list[float] = []

    def one(job: tuple[str, list]) -> None:
        start = time.perf_counter()
        verdict = code.verify(job[0], job[1], sandbox=box, **kwargs)
        latencies.append(time.perf_counter() - start)
        if verdict.outcome is not Outcome.CORRECT:
            raise RuntimeError(f"{method}: {verdict.outcome} {verdict.detail}")

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, jobs))
    seconds = time.perf_counter() - start
    return Row(method, sum(len(j[1]) for j in jobs), len(jobs), seconds, 1000 * statistics.median(latencies))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="verifications per batched row")
    parser.add_argument("--threads", type=int, default=4, help="threads for the Code-v0 sweep")
    args = parser.parse_args()
    box = sandbox.shared_sandbox()
    timed_verifications("warm-up", [(PROGRAM, make_tests(3))] * 4, box, threads=4)

    rows = [
        timed_verifications(f"batched, {n} tests per call", [(PROGRAM, make_tests(n))] * args.repeats, box)
        for n in (1, 6, 24)
    ]
    singles = [(PROGRAM, [t]) for t in make_tests(24)]
    rows.append(timed_verifications("unbatched, 1 test per call (24 calls)", singles, box))
    rows.append(
        timed_verifications(
            "HumanEval-shaped check, 1 test per call",
            [(HUMANEVAL_PROGRAM, [code.AssertTest(HUMANEVAL_TEST)])] * args.repeats,
            box,
        )
    )
    env = CodeEnv()
    sweep = [(t.reference, list(t.answer)) for t in env.tasks]
    rows.append(
        timed_verifications(
            f"Code-v0 references, {args.threads} threads", sweep, box, threads=args.threads, function=None
        )
    )

    print(f"{'method':44s} {'tests':>6s} {'calls':>6s} {'tests/s':>8s} {'median ms/call':>15s} {'ms/test':>8s}")
    for r in rows:
        print(
            f"{r.method:44s} {r.tests:6d} {r.calls:6d} {r.tests_per_s:8.1f} {r.median_ms:15.1f} "
            f"{1000 / r.tests_per_s:8.2f}"
        )
    batched, unbatched = rows[2], rows[3]
    speedup = batched.tests_per_s / unbatched.tests_per_s
    print(
        f"\nbatched vs one call per test: {speedup:.1f}x (target >= {TARGET_BATCH_SPEEDUP:.0f}x); "
        f"batched {batched.tests_per_s:.0f} tests/s (target >= {TARGET_TESTS_PER_S:.0f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
