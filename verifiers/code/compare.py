"""Judging one test from the harness's report, on the host: pure functions, no I/O.

The program's return values arrive as text and are read by `values.decode`, which builds exact
plain types only; nothing the program defined is ever called here.
- A call test compares the return value after a JSON round trip of both sides
  (`values.json_form`: tuples become lists, dict keys strings; a set, bytes or complex value is
  not JSON and fails, and so does a dict whose keys collapse into one there, `{1: 99, '1': 2}`:
  merging them would let a program pick the surviving value). Then `values_equal` is structural
  equality with these rules for numbers, and why:
  - bools equal only bools (`True != 1`): a predicate must say True, not 1;
  - an int expectation is exact: only an int equal to it passes, never a float (not 3.0 for 3,
    not a float within 1e-9 of `factorial(20)`, not Binet's float formula for `fib(100)`): ints
    cross the sandbox wall as exact ints, and a float that is close is a different, wrong answer;
  - a float expectation accepts an int or a float within a relative 1e-9 or an absolute 1e-12
    (DEFAULT_REL_TOL, DEFAULT_ABS_TOL): floats carry rounding, and a sum taken in another order
    is still the right answer; two NaNs are equal, an infinity equals only itself;
  - a test that sets `rel_tol` or `abs_tol` (`CallTest`) opts into that tolerance for every
    number it compares, ints included (the one it leaves unset is 0).
  Comparing never raises on a value the codec admits (an int of 4,000 digits against a float is
  compared exactly, not converted to a float): a crash in the judge would be an `error`
  verdict, which a wrong answer must never reach.
- A converted assert test (`judged_asserts`) evaluates its checks over the values with Python's
  own semantics.
- Any other assert test ran in the harness's judge (`harness_judge`), a process holding none of
  the program's code, where the program's functions are proxies returning decoded plain data;
  its report (`passed`, `failed`, `error`, `invalid`) comes from the judge, never from the
  program's process. So no test is judged in the program's interpreter, and every outcome is
  `trust="isolated"`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from rlvr.sandbox.types import valid_text
from rlvr.verifiers.code import judged_asserts, values
from rlvr.verifiers.code.cases import AssertTest, CallTest, IOTest, Test
from rlvr.verifiers.code.harness_run import stdout_digest

SHOW_CHARS = 200  # how much of inputs and outputs a detail line quotes


class TestStatus(StrEnum):
    __test__ = False  # not a pytest test class

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"  # ran, and the value or output is not the expected one
    INVALID_VALUE = "invalid_value"  # returned something that is not plain data
    RUNTIME_ERROR = "runtime_error"  # raised, exited non-zero, or never reported
    TIMEOUT = "timeout"
    OUTPUT_LIMIT = "output_limit"
    SKIPPED = "skipped"  # not run: an earlier failure stopped the run, by option


class Trust(StrEnum):
    # Judged on the host from values or output, or by the harness's judge from plain data: the
    # program cannot forge it. (The former "in-process", test code run in the program's own
    # interpreter, is gone: such tests now run in the judge.)
    ISOLATED = "isolated"


@dataclass(frozen=True)
class TestOutcome:
    """One test's result: a typed `status`, a short `detail`, and how far it can be trusted."""

    __test__ = False  # not a pytest test class

    index: int
    kind: str
    status: TestStatus
    detail: str = ""
    time_s: float | None = None
    trust: Trust = Trust.ISOLATED

    @property
    def passed(self) -> bool:
        return self.status is TestStatus.PASSED

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


DEFAULT_REL_TOL, DEFAULT_ABS_TOL = 1e-9, 1e-12  # a float expectation's tolerance, unless the test sets one


def values_equal(got: Any, expected: Any, rel_tol: float | None = None, abs_tol: float | None = None) -> bool:
    """Structural equality of JSON-form values with the number rules of the module docstring;
    `rel_tol`/`abs_tol` (either given) opt every number into that tolerance. Never raises on
    plain data."""
    tolerance = None if rel_tol is None and abs_tol is None else (rel_tol or 0.0, abs_tol or 0.0)
    return _equal(got, expected, tolerance)


def _equal(got: Any, expected: Any, tolerance: tuple[float, float] | None) -> bool:
    if type(expected) is bool or type(got) is bool:
        return type(got) is type(expected) and got == expected
    if type(expected) in (int, float) and type(got) in (int, float):
        if tolerance is None:
            if type(expected) is int:
                return type(got) is int and got == expected
            tolerance = (DEFAULT_REL_TOL, DEFAULT_ABS_TOL)
        return _close(got, expected, *tolerance)
    if type(expected) is list and type(got) is list:
        return len(got) == len(expected) and all(_equal(g, e, tolerance) for g, e in zip(got, expected))
    if type(expected) is dict and type(got) is dict:
        return got.keys() == expected.keys() and all(_equal(got[k], expected[k], tolerance) for k in expected)
    return type(got) is type(expected) and got == expected


def _close(a: int | float, b: int | float, rel_tol: float, abs_tol: float) -> bool:
    """|a - b| <= max(rel_tol * max(|a|, |b|), abs_tol), for any ints and floats: an int too large
    for a float is compared exactly (as fractions), not converted (OverflowError)."""
    if a != a or b != b:  # NaN (an int never is)
        return a != a and b != b
    if a == b:  # exact; an infinity equals only itself (Python compares ints and floats exactly)
        return True
    if (type(a) is float and math.isinf(a)) or (type(b) is float and math.isinf(b)):
        return False
    try:
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:
        fa, fb = Fraction(a), Fraction(b)
        return abs(fa - fb) <= max(Fraction(rel_tol) * max(abs(fa), abs(fb)), Fraction(abs_tol))


def _short(text: str) -> str:
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + "..."


def _short_json(value: Any) -> str:
    return _short(json.dumps(value))


def _crash(report: dict[str, Any]) -> TestStatus | None:
    """Why the run itself failed (whatever the expected output), or None. A spawn failure or a
    killed harness (`grader_killed`) can only be the program's doing: a runtime error."""
    status = report.get("status")
    if status in ("timeout", "output_limit"):
        return TestStatus(status)
    return None if status == "done" else TestStatus.RUNTIME_ERROR


def _stderr_line(report: dict[str, Any]) -> str:
    lines = [line for line in str(report.get("stderr_tail", "")).splitlines() if line.strip()]
    return lines[-1].strip()[:SHOW_CHARS] if lines else ""


def is_judged(test: Test) -> bool:
    """An assert test the host cannot evaluate: it ran in the harness's judge."""
    return isinstance(test, AssertTest) and judged_asserts.convert(test.code) is None


def grade(index: int, test: Test, report: dict[str, Any]) -> TestOutcome:
    """Judge one test from its harness report (the expected output never entered the sandbox)."""
    kind, time_s = test.kind, report.get("time_s")

    def outcome(status: TestStatus, detail: str = "") -> TestOutcome:  # trust: isolated, as every test is
        return TestOutcome(index, kind, status, valid_text(detail[:600]), time_s)  # program text: always valid

    if report.get("status") == "skipped":
        return outcome(TestStatus.SKIPPED, "not run: an earlier test failed")
    if report.get("status") == "over_budget":  # the verification's time cap (RunSettings.max_wall_s)
        return outcome(TestStatus.TIMEOUT, "the verification's time budget ran out")
    crash = _crash(report)
    if crash is TestStatus.TIMEOUT:
        return outcome(crash, f"time limit exceeded ({time_s}s)")
    if crash is TestStatus.OUTPUT_LIMIT:
        return outcome(crash, "output limit exceeded")
    if crash:
        return outcome(crash, str(report.get("detail", report.get("status")))[:SHOW_CHARS])
    if isinstance(test, IOTest):
        return outcome(*_grade_io(test, report))
    result = report.get("result")
    if not isinstance(result, dict):
        return outcome(
            TestStatus.RUNTIME_ERROR,
            _stderr_line(report) or f"exited with code {report.get('exit_code')} before reporting",
        )
    tag, body = result.get("tag"), str(result.get("body", ""))
    if is_judged(test):  # the judge's verdict (the program's process never reports for these)
        if tag == "passed":
            return outcome(TestStatus.PASSED)
        if tag == "invalid":
            return outcome(TestStatus.INVALID_VALUE, body)
        wrong = tag == "failed" and body.startswith("AssertionError")
        return outcome(
            TestStatus.WRONG_ANSWER if wrong else TestStatus.RUNTIME_ERROR, body or "the test code did not pass"
        )
    if tag == "error":
        return outcome(TestStatus.RUNTIME_ERROR, body)
    if tag == "invalid":
        return outcome(TestStatus.INVALID_VALUE, f"the return value is not plain data: {body}")
    if tag != "values":
        return outcome(TestStatus.INVALID_VALUE, f"a {tag!r} report where values were due")
    try:
        got = values.decode(body)
    except values.NotPlainData as exc:
        return outcome(TestStatus.INVALID_VALUE, f"unreadable return values: {exc}")
    if not isinstance(got, list):
        return outcome(TestStatus.INVALID_VALUE, "the return values are not a list")
    if isinstance(test, CallTest):
        return outcome(*_grade_call(test, got))
    return outcome(*_grade_judged(test, got))


def _grade_io(test: IOTest, report: dict[str, Any]) -> tuple[TestStatus, str]:
    exit_code = report.get("exit_code")
    if exit_code != 0:
        return TestStatus.RUNTIME_ERROR, f"exit code {exit_code}: {_stderr_line(report) or 'no error message'}"
    if report.get("stdout_sha256") == stdout_digest(test.expected_stdout):
        return TestStatus.PASSED, ""
    return TestStatus.WRONG_ANSWER, (
        f"input {_short(test.stdin)!r}: expected {_short(test.expected_stdout)!r}, "
        f"got {_short(report.get('stdout_head', ''))!r}"
    )


def _grade_call(test: CallTest, got: list[Any]) -> tuple[TestStatus, str]:
    call = _short(f"{test.fn}({', '.join(json.dumps(a) for a in test.args)})")
    if len(got) != 1:
        return TestStatus.INVALID_VALUE, f"{call}: {len(got)} return values for one call"
    try:  # what the program's value is after a JSON round trip (it is plain data: safe to dump)
        value = values.json_form(got[0])
    except values.KeysCollide as exc:
        return TestStatus.WRONG_ANSWER, f"{call}: the return value is not JSON data: {exc}"
    except (TypeError, ValueError) as exc:
        return TestStatus.WRONG_ANSWER, f"{call}: the return value is not JSON data ({exc})"
    if values_equal(value, test.expected, test.rel_tol, test.abs_tol):
        return TestStatus.PASSED, ""
    hint = ""
    if type(test.expected) is int and type(value) is float and test.rel_tol is None and test.abs_tol is None:
        hint = " (an int is expected: ints compare exactly)"
    return TestStatus.WRONG_ANSWER, f"{call}: expected {_short_json(test.expected)}, got {_short_json(value)}{hint}"


def _grade_judged(test: AssertTest, got: list[Any]) -> tuple[TestStatus, str]:
    judged = judged_asserts.convert(test.code)
    if len(got) != len(judged.calls):
        return TestStatus.INVALID_VALUE, f"{len(got)} return values for {len(judged.calls)} calls"
    try:
        judged_asserts.evaluate(judged, got)
    except AssertionError as exc:
        return TestStatus.WRONG_ANSWER, f"AssertionError: {exc}"
    except values.NotPlainData as exc:  # e.g. returned values built to collide in set(): the program's doing
        return TestStatus.INVALID_VALUE, f"{type(exc).__name__}: {str(exc)[:SHOW_CHARS]}"
    except Exception as exc:  # noqa: BLE001 - as the test would raise on these values: a runtime error
        return TestStatus.RUNTIME_ERROR, f"{type(exc).__name__}: {str(exc)[:SHOW_CHARS]}"
    return TestStatus.PASSED, ""
