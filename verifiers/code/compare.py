"""Judging one test from the harness's report: pure functions, no I/O.

Return values are compared after a JSON round trip of both sides (what `json.dumps` then
`json.loads` gives: tuples become lists, dict keys become strings, sets are not allowed).
Then `values_equal` is structural equality where bools equal only bools (`True != 1`), ints and
floats compare by value, and floats match within a relative 1e-9 (absolute 1e-12) tolerance;
two NaNs are equal. A return value whose JSON exceeds `harness_child.VALUE_INLINE` (64 KiB)
comes back as a hash of its canonical JSON and must then match exactly (no float tolerance).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from verifiers.code.cases import AssertTest, CallTest, IOTest, Test
from verifiers.code.harness_child import value_digest
from verifiers.code.harness_program import stdout_digest

SHOW_CHARS = 200  # how much of inputs and outputs a detail line quotes


@dataclass(frozen=True)
class TestOutcome:
    """One test's result. `status`: passed, wrong_answer, runtime_error, timeout,
    output_limit or skipped (not run: an earlier failure stopped the run, by option)."""

    __test__ = False  # not a pytest test class

    index: int
    kind: str
    status: str
    detail: str = ""
    time_s: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def values_equal(got: Any, expected: Any, rel_tol: float = 1e-9, abs_tol: float = 1e-12) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if isinstance(expected, int) and isinstance(got, int):
            return got == expected
        if math.isnan(got) or math.isnan(expected):
            return math.isnan(got) and math.isnan(expected)
        return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(values_equal(g, e, rel_tol, abs_tol) for g, e in zip(got, expected))
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(values_equal(got[k], expected[k], rel_tol, abs_tol) for k in expected)
    return type(got) is type(expected) and got == expected


def _short(text: str) -> str:
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + "..."


def _short_json(value: Any) -> str:
    return _short(json.dumps(value))


def _crash(report: dict[str, Any]) -> str | None:
    """Why the run itself failed (whatever the expected output), or None. A spawn failure or a
    killed harness (`grader_killed`) can only be the program's doing: a runtime error."""
    status = report.get("status")
    if status in ("timeout", "output_limit"):
        return status
    return None if status == "done" else "runtime_error"


def _stderr_line(report: dict[str, Any]) -> str:
    lines = [line for line in str(report.get("stderr_tail", "")).splitlines() if line.strip()]
    return lines[-1].strip()[:SHOW_CHARS] if lines else ""


def grade(index: int, test: Test, report: dict[str, Any]) -> TestOutcome:
    """Judge one test from its harness report (the expected output never entered the sandbox)."""
    kind, time_s = test.kind, report.get("time_s")
    status = report.get("status")
    if status == "skipped":
        return TestOutcome(index, kind, "skipped", "not run: an earlier test failed")
    crash = _crash(report)
    if crash == "timeout":
        return TestOutcome(index, kind, crash, f"time limit exceeded ({time_s}s)", time_s)
    if crash == "output_limit":
        return TestOutcome(index, kind, crash, "output limit exceeded", time_s)
    if crash:
        return TestOutcome(index, kind, "runtime_error", str(report.get("detail", status))[:SHOW_CHARS], time_s)
    if isinstance(test, IOTest):
        return _grade_io(index, test, report, time_s)
    result = report.get("result")
    if not isinstance(result, dict):
        why = _stderr_line(report) or f"exited with code {report.get('exit_code')} before reporting"
        return TestOutcome(index, kind, "runtime_error", why, time_s)
    if "error" in result:
        error = str(result["error"])[:500]
        return TestOutcome(index, kind, "wrong_answer" if error.startswith("AssertionError") else "runtime_error",
                           error, time_s)
    if isinstance(test, CallTest):
        return _grade_call(index, test, result, time_s)
    assert isinstance(test, AssertTest)
    if result.get("passed") is True:
        return TestOutcome(index, kind, "passed", "", time_s)
    return TestOutcome(index, kind, "wrong_answer", "the test code did not pass", time_s)


def _grade_io(index: int, test: IOTest, report: dict[str, Any], time_s: Any) -> TestOutcome:
    exit_code = report.get("exit_code")
    if exit_code != 0:
        why = _stderr_line(report) or "no error message"
        return TestOutcome(index, "io", "runtime_error", f"exit code {exit_code}: {why}", time_s)
    if report.get("stdout_sha256") == stdout_digest(test.expected_stdout):
        return TestOutcome(index, "io", "passed", "", time_s)
    return TestOutcome(
        index, "io", "wrong_answer",
        f"input {_short(test.stdin)!r}: expected {_short(test.expected_stdout)!r}, "
        f"got {_short(report.get('stdout_head', ''))!r}", time_s,
    )


def _grade_call(index: int, test: CallTest, result: dict[str, Any], time_s: Any) -> TestOutcome:
    call = _short(f"{test.fn}({', '.join(json.dumps(a) for a in test.args)})")
    if "value_sha256" in result:  # too large to send back: exact comparison of canonical JSON
        if result["value_sha256"] == value_digest(json.dumps(test.expected)):
            return TestOutcome(index, "call", "passed", "", time_s)
        return TestOutcome(index, "call", "wrong_answer", f"{call}: the return value ({result.get('value_bytes')} "
                           f"bytes of JSON, {_short(str(result.get('value_head', '')))}) differs from the expected", time_s)
    try:
        got = json.loads(result["value"])
    except (KeyError, TypeError, ValueError, RecursionError):
        return TestOutcome(index, "call", "runtime_error", f"{call}: no readable return value", time_s)
    if values_equal(got, test.expected):
        return TestOutcome(index, "call", "passed", "", time_s)
    return TestOutcome(index, "call", "wrong_answer",
                       f"{call}: expected {_short_json(test.expected)}, got {_short(str(result['value']))}", time_s)
