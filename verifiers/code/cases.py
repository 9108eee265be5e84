"""Test cases for programs, as typed dataclasses, and a loader from plain dicts (the JSONL shapes).

- `IOTest(stdin, expected_stdout)`: run the program as a script; its stdout must match after
  whitespace normalisation (see `harness_run.normalize_stdout`) and it must exit with 0.
- `CallTest(fn, args, expected)`: import the program (its `__name__` is "solution", so a
  `if __name__ == "__main__":` block does not run), call `fn(*args, **kwargs)`; the return value
  must equal `expected` after a JSON round trip of both (tuples become lists, dict keys strings;
  see `compare.values_equal` for floats and bools). Args, kwargs and expected are stored as their
  JSON round trip (`values.json_form`): exactly what the program receives and is compared to.
  Test data whose dict keys collapse there (`{1: 'a', '1': 'b'}`) is refused (TestSpecError):
  silently keeping one of the values would test something other than what was written.
  Numbers: an int expectation is exact (an int equal to it, never a float), a float expectation
  allows a relative 1e-9 or absolute 1e-12 (see `compare`). A test opts into its own tolerance
  with `rel_tol` and/or `abs_tol` (non-negative finite numbers; the unset one is 0): every number
  it compares, ints included, then matches within it. Only call tests take these fields.
- `AssertTest(code)`: import the program, then run `code` in its namespace (MBPP and HumanEval
  style: `assert f(2) == 4`, or `def check(candidate): ...` followed by `check(f)`); it passes
  when the code runs to its end.
Each test may carry its own `timeout_s` (None: the verifier's default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlvr.verifiers.code import values
from rlvr.verifiers.verdict import VerifierError


class TestSpecError(VerifierError, ValueError):
    """A test case is malformed (wrong types, missing fields, not JSON-serialisable)."""

    __test__ = False  # not a pytest test class


def json_roundtrip(value: Any, what: str) -> Any:
    try:
        return values.json_form(value)
    except values.KeysCollide as exc:
        raise TestSpecError(f"{what}: {exc}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise TestSpecError(f"{what} must be JSON-serialisable: {exc}") from None


def _check_tolerance(tol: Any, name: str) -> float | None:
    if tol is None:
        return None
    if type(tol) not in (int, float) or not 0 <= tol < math.inf:
        raise TestSpecError(f"{name} must be a non-negative finite number or None, got {tol!r}")
    return float(tol)


def _check_timeout(timeout_s: float | None) -> None:
    if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and 0 < timeout_s < math.inf):
        raise TestSpecError(f"timeout_s must be a positive number or None, got {timeout_s!r}")


def _check_str(value: Any, name: str) -> None:
    if not isinstance(value, str):
        raise TestSpecError(f"{name} must be a str, got {type(value).__name__}")


@dataclass(frozen=True)
class IOTest:
    stdin: str
    expected_stdout: str
    timeout_s: float | None = None
    kind: ClassVar[str] = "io"

    def __post_init__(self) -> None:
        _check_str(self.stdin, "IOTest.stdin")
        _check_str(self.expected_stdout, "IOTest.expected_stdout")
        _check_timeout(self.timeout_s)


@dataclass(frozen=True)
class CallTest:
    fn: str
    args: tuple = ()
    expected: Any = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    rel_tol: float | None = None  # set either to compare every number within a tolerance, ints included
    abs_tol: float | None = None
    kind: ClassVar[str] = "call"

    def __post_init__(self) -> None:
        if not isinstance(self.fn, str) or not self.fn.isidentifier():
            raise TestSpecError(f"CallTest.fn must be a function name, got {self.fn!r}")
        if not isinstance(self.args, (list, tuple)):
            raise TestSpecError(f"CallTest.args must be a list or tuple, got {type(self.args).__name__}")
        if not isinstance(self.kwargs, Mapping) or not all(isinstance(k, str) for k in self.kwargs):
            raise TestSpecError("CallTest.kwargs must be a mapping with str keys")
        # Stored as their JSON round trip: exactly what the program receives and is compared to.
        object.__setattr__(self, "args", tuple(json_roundtrip(list(self.args), f"CallTest({self.fn}).args")))
        object.__setattr__(self, "kwargs", json_roundtrip(dict(self.kwargs), f"CallTest({self.fn}).kwargs"))
        object.__setattr__(self, "expected", json_roundtrip(self.expected, f"CallTest({self.fn}).expected"))
        _check_timeout(self.timeout_s)
        object.__setattr__(self, "rel_tol", _check_tolerance(self.rel_tol, f"CallTest({self.fn}).rel_tol"))
        object.__setattr__(self, "abs_tol", _check_tolerance(self.abs_tol, f"CallTest({self.fn}).abs_tol"))


@dataclass(frozen=True)
class AssertTest:
    code: str
    timeout_s: float | None = None
    kind: ClassVar[str] = "assert"

    def __post_init__(self) -> None:
        _check_str(self.code, "AssertTest.code")
        if not self.code.strip():
            raise TestSpecError("AssertTest.code is empty")
        _check_timeout(self.timeout_s)


Test = IOTest | CallTest | AssertTest
TEST_TYPES = (IOTest, CallTest, AssertTest)


def _first(d: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in d:
            return d[key]
    return None


def load_test(d: Mapping[str, Any] | Test) -> Test:
    """One test from a dict. Accepted keys (an explicit "kind": "io" | "call" | "assert" wins):
    io: "stdin"/"input" and "expected_stdout"/"stdout"/"output";
    call: "fn"/"fn_name"/"function", "args" (or "input"), "kwargs", "expected"/"output", and
    optionally "rel_tol", "abs_tol"; assert: "code"/"assert"/"test". Any of them may add "timeout_s"."""
    if isinstance(d, TEST_TYPES):
        return d
    if not isinstance(d, Mapping):
        raise TestSpecError(f"a test must be a dict or a test dataclass, got {type(d).__name__}")
    timeout = d.get("timeout_s")
    kind = d.get("kind")
    if kind is None:
        if _first(d, "fn", "fn_name", "function") is not None:
            kind = "call"
        elif _first(d, "code", "assert", "test") is not None:
            kind = "assert"
        elif _first(d, "stdin", "input") is not None:
            kind = "io"
        else:
            raise TestSpecError(f"cannot tell the kind of test from keys {sorted(d)}")
    if kind != "call" and any(d.get(k) is not None for k in ("rel_tol", "abs_tol")):
        raise TestSpecError("rel_tol and abs_tol apply to call tests only")
    if kind == "io":
        expected = _first(d, "expected_stdout", "stdout", "output")
        if expected is None:
            raise TestSpecError(f"io test without an expected output: keys {sorted(d)}")
        return IOTest(_first(d, "stdin", "input") or "", expected, timeout)
    if kind == "call":
        if "expected" not in d and "output" not in d:
            raise TestSpecError(f"call test without 'expected': keys {sorted(d)}")
        args = _first(d, "args", "input")
        return CallTest(
            _first(d, "fn", "fn_name", "function"),
            () if args is None else args,
            _first(d, "expected", "output"),
            d.get("kwargs") or {},
            timeout,
            d.get("rel_tol"),
            d.get("abs_tol"),
        )
    if kind == "assert":
        return AssertTest(_first(d, "code", "assert", "test"), timeout)
    raise TestSpecError(f"unknown test kind {kind!r} (io, call or assert)")


def load_tests(items: Sequence[Mapping[str, Any] | Test]) -> list[Test]:
    """Tests from a list of dicts (or dataclasses, passed through); errors name the index."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise TestSpecError(f"tests must be a list, got {type(items).__name__}")
    tests = []
    for i, item in enumerate(items):
        try:
            tests.append(load_test(item))
        except TestSpecError as exc:
            raise TestSpecError(f"test {i}: {exc}") from None
    return tests


def dump_test(test: Test) -> dict[str, Any]:
    """The plain-dict form `load_test` reads back (for JSONL)."""
    if isinstance(test, IOTest):
        d: dict[str, Any] = {"stdin": test.stdin, "stdout": test.expected_stdout}
    elif isinstance(test, CallTest):
        d = {"fn": test.fn, "args": list(test.args), "expected": test.expected}
        if test.kwargs:
            d["kwargs"] = dict(test.kwargs)
        d.update({k: v for k, v in (("rel_tol", test.rel_tol), ("abs_tol", test.abs_tol)) if v is not None})
    else:
        d = {"assert": test.code}
    if test.timeout_s is not None:
        d["timeout_s"] = test.timeout_s
    return d
