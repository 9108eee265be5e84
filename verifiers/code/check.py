"""`verify(response, tests, sandbox=None) -> Verdict`: extract the program, run the tests in the
sandbox (many per call), score all-or-nothing or by fraction passed."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from rlvr.sandbox.types import valid_text
from rlvr.verifiers.code.cases import Test, load_tests
from rlvr.verifiers.code.compare import TestOutcome, TestStatus, Trust, grade
from rlvr.verifiers.code.extract import extract_program
from rlvr.verifiers.code.harness import HarnessError, RunSettings, chunks, run_chunk
from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError

VERSION = "3"  # 2: values judged on the host; assert tests converted to calls. 3: no test in-process (the judge)
Scoring = Literal["all_or_nothing", "fraction"]
SCORINGS = ("all_or_nothing", "fraction")


def _default_sandbox() -> Any:
    from rlvr import sandbox  # imported here: building the Docker client is not needed to load verifiers

    return sandbox.shared_sandbox()


def run_tests(
    program: str, tests: Sequence[Test], sandbox: Any = None, settings: RunSettings = RunSettings()
) -> list[TestOutcome]:
    """Run every test against `program` and judge each, within `settings.max_wall_s` in all (the
    tests it leaves unrun are timeouts). Raises HarnessError on sandbox trouble."""
    if sandbox is None:
        try:
            sandbox = _default_sandbox()
        except Exception as exc:  # noqa: BLE001 - no sandbox is the grader's trouble, not the program's
            raise HarnessError(f"no sandbox: {type(exc).__name__}: {exc}") from exc
    outcomes: list[TestOutcome] = []
    stop = False
    deadline = time.monotonic() + settings.max_wall_s
    for indices in chunks(tests, settings):
        batch = [tests[i] for i in indices]
        left = deadline - time.monotonic()
        if stop or left <= 0:
            reports = [{"status": "skipped" if stop else "over_budget"} for _ in batch]
        else:
            reports = run_chunk(sandbox, program, batch, settings, left)
        outcomes += [grade(i, t, r) for i, t, r in zip(indices, batch, reports)]
        # Later chunks are skipped once the grader was killed, or (fail_fast) after any failure.
        stop = (
            stop
            or any(r.get("status") == "grader_killed" for r in reports)
            or (settings.fail_fast and not all(o.passed for o in outcomes))
        )
    return outcomes


def score_outcomes(outcomes: Sequence[TestOutcome], scoring: Scoring) -> tuple[float, Outcome]:
    passed = sum(o.passed for o in outcomes)
    total = len(outcomes)
    outcome = Outcome.CORRECT if passed == total else Outcome.INCORRECT
    if scoring == "fraction":
        return passed / total, outcome
    return float(passed == total), outcome


def verify(
    response: str,
    tests: Sequence[Test | Mapping[str, Any]],
    sandbox: Any = None,
    *,
    scoring: Scoring = "all_or_nothing",
    function: str | None = None,
    settings: RunSettings | None = None,
) -> Verdict:
    """Check the program in `response` against `tests` (dataclasses or their dicts).

    `scoring`: "all_or_nothing" (1 iff every test passes; stops at the first visible failure
    unless `settings` say otherwise) or "fraction" (share of tests passed; runs them all).
    `function`: the function to extract when the response has several blocks or none.
    `sandbox`: anything with `run(files, command, stdin, limits)`; None: `sandbox.shared_sandbox()`.
    `info["tests"]` lists each test's outcome; `info["trust"]` is "isolated": every test is judged
    out of the program's reach, on the host from values or output, or by the harness's judge
    (assert tests that `judged_asserts` cannot convert). Sandbox trouble gives `outcome="error"`."""
    if scoring not in SCORINGS:
        raise VerifierError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    typed = load_tests(tests)
    if not typed:
        raise VerifierError("no tests to run")
    if settings is None:
        settings = RunSettings(fail_fast=scoring == "all_or_nothing")
    info: dict[str, Any] = {"verifier": f"code-{VERSION}", "scoring": scoring, "total": len(typed)}
    program = extract_program(response, function)
    if program is None:
        return Verdict(0.0, Outcome.FORMAT_ERROR, "no fenced Python code block in the response", info)
    try:
        outcomes = run_tests(program, typed, sandbox, settings)
    except HarnessError as exc:
        return Verdict(0.0, Outcome.ERROR, valid_text(str(exc)[:500]), info)
    score, outcome = score_outcomes(outcomes, scoring)
    passed = sum(o.passed for o in outcomes)
    failures = [o for o in outcomes if not o.passed and o.status is not TestStatus.SKIPPED]
    detail = f"{passed}/{len(outcomes)} tests passed"
    if failures:
        detail += f"; test {failures[0].index} {failures[0].status}: {failures[0].detail}"
    info.update(passed=passed, trust=str(Trust.ISOLATED), tests=[o.to_dict() for o in outcomes])
    return Verdict(score, outcome, detail[:600], info)
