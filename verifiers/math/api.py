"""`verify(response, gold)`: the math verifier's entry point.

Extraction and two fast paths (the same string; two different plain integers) run in the calling
thread (linear scans, milliseconds on `max_response_chars`); parsing and SymPy run in a worker
process under a hard deadline (see `bounded`).

Time: one call takes at most about `timeout_s`. The deadline starts when `verify` is called, so
the work done in the calling thread (extraction, at most `max_response_chars` characters; string
clean-up, only of answers within `max_answer_chars`) counts against it, and the worker gets what
is left. (The first call's worker start-up is not counted; call `warm_up()` to pay it up front.)

Outcomes of a time-out: the judge running past the deadline on a *model's* answer is that
answer's doing (a box of 48 `\\sin(10^{9999})` terms), so it is `incorrect` with detail
"timeout: ..." (never `error`, which training leaves out: being slow must not dodge a 0). When
the grader was the slow part, it is `error`: no worker became free before the deadline, or the
judge got under half of `timeout_s` to run because waiting for a worker took the rest; so are a
worker that died, a pool that cannot start, and a judge that crashed (the grader's own failures).
An answer that the text denies ("the answer is not 5") or that runs out of the worker's memory
is `incorrect`.

The default worker pool is a module-level cache, created on first use and closed at exit (and
re-created in a forked child or after `shutdown()`); it is never stored on env objects, which
stay picklable. First-call latency: starting the workers takes about a second (an interpreter
importing SymPy) and is not counted against `timeout_s`; call `warm_up()` to pay it up front.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import threading
import time

from rlvr.verifiers.math.bounded import JobTimeout, PoolError, PoolTimeout, WorkerPool
from rlvr.verifiers.math.final_answer import extract
from rlvr.verifiers.math.grade import judge_job
from rlvr.verifiers.math.markers import extract_gold
from rlvr.verifiers.math.normalize import squash
from rlvr.verifiers.math.options import MathOptions, VerifierTypeError
from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError

VERSION = "2.0"  # 1.1: no numeric tolerance (see decimals), more answer forms; 1.2: denials,
# retractions, hedges and false statements are wrong, labelled answers, a slow answer is incorrect;
# 2.0: the final-answer grammar (`final_answer`): a marker is required, the region parses completely,
# a later marked answer supersedes, no text of a model's makes an `error`
# Digits with an optional sign: an integer however written (-0, 007, +5). At most 30 digits, so
# int() is cheap; longer ones go to the judge with everything else.
_DIGITS = re.compile(r"[-+]?[0-9]{1,30}")
DEFAULT_OPTIONS = MathOptions()
POOL_SIZE = max(2, min(4, (os.cpu_count() or 2) // 2))

_pool_lock = threading.Lock()
_pool: list[WorkerPool] = []  # the cached default pool (zero or one), see module docstring


def _warm() -> None:
    """Run in each new worker: import and exercise SymPy so the first real job is fast."""
    judge_job("\\frac{1}{2}", ("0.5", "x^2 - 1"), MathOptions(isolate=False))
    judge_job("x^2", ("x^2 + \\lfloor x^2/10^{40} \\rfloor",), MathOptions(isolate=False))  # simplify: slow first call


def default_pool() -> WorkerPool:
    with _pool_lock:
        if _pool and (_pool[0].closed or _pool[0].pid != os.getpid()):
            _pool.clear()  # closed, or inherited through fork: never touch the parent's workers
        if not _pool:
            _pool.append(WorkerPool(POOL_SIZE, init=(_warm, ())))
        return _pool[0]


def warm_up(timeout: float = 60.0) -> None:
    """Start the default worker pool now and wait until it is ready."""
    default_pool().warm_up(timeout)


def shutdown() -> None:
    """Stop the default worker pool (a later `verify` starts a new one)."""
    with _pool_lock:
        pools = list(_pool)
        _pool.clear()
    for pool in pools:
        if pool.pid == os.getpid():
            pool.close()


atexit.register(shutdown)


def _short(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "..."


@functools.lru_cache(maxsize=4096)
def _reference(gold: str) -> tuple[str, str]:
    """The gold's answer and its squashed form. Cached: a group's G completions, and every epoch,
    check against the same gold, and both are pure string functions of it."""
    reference = extract_gold(gold)
    return reference, squash(reference)


def verify(response: str, gold: str, options: MathOptions | None = None) -> Verdict:
    """Score `response` (the model's whole text) against `gold` (the reference answer).

    correct (1.0): the final answer equals the gold; incorrect (0.0): it does not, or hedges
    between different answers; format_error (0.0): no final answer could be found; error (0.0):
    the grader itself failed or ran out of time, which is not the model's fault."""
    if not isinstance(response, str):
        raise VerifierTypeError(f"response must be a str, got {type(response).__name__}")
    if not isinstance(gold, str):
        raise VerifierTypeError(f"gold must be a str, got {type(gold).__name__}")
    if options is not None and not isinstance(options, MathOptions):
        raise VerifierTypeError(f"options must be MathOptions or None, got {type(options).__name__}")
    o = options or DEFAULT_OPTIONS
    start = time.monotonic()
    if not gold.strip():
        raise VerifierError("gold answer is empty")
    reference, gold_answer = _reference(gold)
    found = extract(response[-o.max_response_chars :], o.max_boxes, o.require_marker, o.answer_patterns)
    info = {"extracted": [_short(a) for a in found.answers[:4]], "method": found.method, "verifier_version": VERSION}
    if found.too_many:
        return Verdict(0.0, Outcome.INCORRECT, f"hedged: more than {o.max_boxes} different boxed answers", info)
    if not found.answers and found.denied is not None:
        why = f"denied: the response negates its final answer ({_short(found.denied, 60)!r})"
        return Verdict(0.0, Outcome.INCORRECT, why, info)
    if not found.answers:
        why = "\\boxed{ is never closed (truncated?)" if found.unclosed else "no marked final answer"
        return Verdict(0.0, Outcome.FORMAT_ERROR, why, info)
    too_long = [a for a in found.answers + (reference,) if len(a) > o.max_answer_chars]
    if too_long:  # before any clean-up: string work in this thread stays within max_answer_chars
        why = f"answer longer than {o.max_answer_chars} characters: not compared"
        return Verdict(0.0, Outcome.INCORRECT, why, info)
    if len(found.answers) == 1:
        answer = squash(found.answers[0])
        if answer == gold_answer:
            return Verdict(1.0, Outcome.CORRECT, "identical to the reference", info)
        if _DIGITS.fullmatch(answer) and _DIGITS.fullmatch(gold_answer) and int(answer) != int(gold_answer):
            # Two integers of different value are different numbers under every option (tolerances
            # apply to decimal golds only): no need for SymPy or a worker. Equal values written
            # differently (007 and 7) still go to the judge, which decides them.
            return Verdict(0.0, Outcome.INCORRECT, "a different integer", info)
    args = (reference, found.answers, o, found.fallback)
    try:
        if o.isolate:
            remaining = o.timeout_s - (time.monotonic() - start)
            correct, detail = default_pool().run(judge_job, args, max(remaining, 0.001))
        else:  # guarded against hostile input, but without a hard deadline
            correct, detail = judge_job(*args)
    except JobTimeout as exc:
        if exc.ran_s >= o.timeout_s / 2:  # the answer had its time: too slow to judge is wrong
            return Verdict(0.0, Outcome.INCORRECT, f"timeout: the answer took over {exc.ran_s:.2f} s to judge", info)
        return Verdict(0.0, Outcome.ERROR, f"grader timed out (busy): {exc}", info)
    except PoolTimeout as exc:
        return Verdict(0.0, Outcome.ERROR, f"grader timed out: {exc}", info)
    except PoolError as exc:
        return Verdict(0.0, Outcome.ERROR, f"grader failed: {exc}", info)
    if correct is None:
        return Verdict(0.0, Outcome.ERROR, detail, info)
    if found.method == "last_number":  # only with require_marker=False
        detail = f"lenient (no answer marker, the last number): {detail}"
    return Verdict(1.0 if correct else 0.0, Outcome.CORRECT if correct else Outcome.INCORRECT, detail, info)
