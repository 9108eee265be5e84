"""The host side of a sandbox round: build the harness's spec, make one sandbox call for many
tests, read back the nonce-marked report. The harness itself is `harness_program.py` and the
modules shipped next to it (`HARNESS_FILES`).

What goes where: the spec file holds the program and what its test children need (stdin, the
calls' arguments), never an expected output. The code of judged tests (assert tests that
`judged_asserts` cannot convert) holds expected values, so it travels on the harness's stdin
after the nonce, which only the outer harness process reads, after it forked the worker: no
process that runs the program ever holds it (see `harness_judge.py`). So do the expectations the
harness stops early on (`harness_expect`: a digest of a stdin/stdout test's output, the expected
value of an exact call test or of one `assert f(...) == constant`)."""

from __future__ import annotations

import functools
import importlib.util
import json
import py_compile
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rlvr.errors import RlvrError
from rlvr.sandbox.types import MAX_OUTPUT_BYTES, Limits, Status
from rlvr.verifiers.code import harness_run, judged_asserts, values
from rlvr.verifiers.code.cases import AssertTest, CallTest, IOTest, Test

HARNESS_FILES = (  # shipped as named here
    "harness_program.py",
    "harness_run.py",
    "harness_child.py",
    "harness_judge.py",
    "harness_expect.py",
    "values.py",
)
SPEC_FILE = "spec.json"
# Imported rather than run as a script, so that its bytecode too comes from __pycache__.
HARNESS_MAIN = "import sys, harness_program; sys.exit(harness_program.main(sys.argv))"
STARTUP_S = 3.0  # the harness's own start, on a busy machine
PER_TEST_OVERHEAD_S = 0.5  # spawn, kill and reap around each test's own limit
# A report line holds at most HEAD_CHARS + TAIL_CHARS of program text (up to 12 bytes a char in
# ASCII JSON: a surrogate pair), a message of up to MESSAGE_CHARS and a few short fields ...
FIXED_LINE_BYTES = 12 * (harness_run.HEAD_CHARS + harness_run.TAIL_CHARS + harness_run.MESSAGE_CHARS) + 4096
# ... plus return values (printable ASCII, 2x when escaped in JSON): one test's up to `output_cap`,
# all of a call's together up to VALUE_BUDGET (beyond it the harness reports `output_limit`).
VALUE_BUDGET = 6 << 20


# Not a VerifierError: that is misuse, which `compose` re-raises; this is the grader's failure (an `error` verdict).
class HarnessError(RlvrError):
    """The sandbox or the harness failed (not the program): the verdict is `error`."""


@dataclass(frozen=True)
class RunSettings:
    """How tests run. `timeout_s`: each test's default wall-clock limit (a test's own
    `timeout_s` wins); `memory_mb`: address-space limit of each test's process; `output_cap`:
    bytes of stdout+stderr (and of a return value) one test may produce before it is killed;
    `fail_fast`: stop after the first test that failed, visibly in the sandbox or by a value
    surely wrong (`harness_expect`); `max_wall_s`: the whole verification's time, whatever the
    number of tests: the tests it leaves unrun (or cuts) fail as timeouts, so that no program
    holds a trainer for longer, however many tests it takes its time on."""

    timeout_s: float = 4.0
    memory_mb: int = 256
    output_cap: int = 1024 * 1024
    fail_fast: bool = True
    max_tests_per_call: int = 64
    max_seconds_per_call: float = 60.0
    max_wall_s: float = 20.0

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.memory_mb < 32 or not 1024 <= self.output_cap <= VALUE_BUDGET:
            raise ValueError(f"bad run settings: {self}")
        if self.max_tests_per_call < 1 or self.max_seconds_per_call <= 0 or not self.max_wall_s > 0:
            raise ValueError(f"bad run settings: {self}")


@functools.lru_cache(maxsize=1)
def harness_files() -> dict[str, str | bytes]:
    """The harness's sources and, compiled here once, their bytecode. Compiling the harness costs
    the sandbox's interpreter about 5 ms a call; it imports `__pycache__` files of its own cache
    tag without checking them (unchecked-hash pycs, PEP 552). An interpreter of another version
    looks for another tag, ignores these and compiles the sources as before."""
    package = resources.files("rlvr.verifiers.code")
    files: dict[str, str | bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in HARNESS_FILES:
            source = package.joinpath(name).read_text(encoding="utf-8")
            files[name] = source
            Path(tmp, name).write_text(source, encoding="utf-8")
            pyc = py_compile.compile(
                str(Path(tmp, name)),
                cfile=str(Path(tmp, name + "c")),
                dfile=name,
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            files[importlib.util.cache_from_source(name)] = Path(pyc).read_bytes()
    return files


def timeout_of(test: Test, settings: RunSettings) -> float:
    return float(test.timeout_s if test.timeout_s is not None else settings.timeout_s)


def spec_entry(test: Test, settings: RunSettings) -> dict[str, Any]:
    """What the harness's worker needs of a test: never the expected output (judged outside).
    Call tests and convertible assert tests become calls; other assert tests are `judge` tests,
    whose code goes to the judge only (`judged_code`)."""
    entry: dict[str, Any] = {"kind": test.kind, "timeout_s": timeout_of(test, settings)}
    if isinstance(test, IOTest):
        entry["stdin"] = test.stdin
    elif isinstance(test, CallTest):
        # JSON data: its repr is a Python literal (nan and inf are named in the child)
        entry.update(
            kind="call", calls=[{"fn": test.fn, "args": repr(tuple(test.args)), "kwargs": repr(dict(test.kwargs))}]
        )
    elif (judged := judged_asserts.convert(test.code)) is not None:
        entry.update(kind="call", calls=[{"fn": c.fn, "args": c.args, "kwargs": c.kwargs} for c in judged.calls])
    else:
        entry["kind"] = "judge"
    return entry


def judged_code(tests: Sequence[Test]) -> dict[str, str]:
    """The code of the judged tests, by their index in the call: for the judge, on stdin."""
    return {
        str(i): t.code
        for i, t in enumerate(tests)
        if isinstance(t, AssertTest) and judged_asserts.convert(t.code) is None
    }


@functools.lru_cache(maxsize=4096)
def _assert_expectation(code: str) -> dict[str, str] | None:
    judged = judged_asserts.convert(code)
    found, constant = judged_asserts.expected_constant(judged) if judged is not None else (False, None)
    try:
        return {"eq": values.encode(constant)} if found else None
    except values.NotPlainData:
        return None


def _exact_json(value: Any) -> bool:
    """JSON data without a float anywhere (call tests compare such values exactly)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is list:
            stack += v
        elif type(v) is dict:
            if not all(type(k) is str for k in v):
                return False
            stack += v.values()
        elif not (v is None or type(v) in (bool, int, str)):
            return False
    return True


def expectation(test: Test) -> dict[str, str] | None:
    """What the harness's outer process may check a test's report against, to stop at a value
    that is surely wrong (`harness_expect`); None where only the host can tell."""
    if isinstance(test, IOTest):
        return {"stdout": harness_run.stdout_digest(test.expected_stdout)}
    if isinstance(test, CallTest):
        exact = test.rel_tol is None and test.abs_tol is None and _exact_json(test.expected)
        return {"json": values.encode(test.expected)} if exact else None
    return _assert_expectation(test.code)


def chunks(tests: Sequence[Test], settings: RunSettings) -> list[list[int]]:
    """Indices of the tests, split so that one call stays within the per-call caps (tests, time,
    and the output the sandbox may return)."""
    out: list[list[int]] = []
    current: list[int] = []
    seconds = 0.0
    most = min(settings.max_tests_per_call, (MAX_OUTPUT_BYTES - 4096 - 2 * VALUE_BUDGET) // FIXED_LINE_BYTES)
    for i, test in enumerate(tests):
        t = timeout_of(test, settings)
        if current and (len(current) >= most or seconds + t > settings.max_seconds_per_call):
            out.append(current)
            current, seconds = [], 0.0
        current.append(i)
        seconds += t
    if current:
        out.append(current)
    return out


def call_limits(tests: Sequence[Test], settings: RunSettings, wall_s: float | None = None) -> Limits:
    """The whole call's limits. Memory and pids keep the sandbox's default container shape (warm
    containers are pooled by shape); each test's own memory limit is applied by the harness.
    `wall_s`: what is left of the verification's time (the harness stops there by itself)."""
    budget = sum(timeout_of(t, settings) + PER_TEST_OVERHEAD_S for t in tests)
    if wall_s is not None:
        budget = min(budget, wall_s + PER_TEST_OVERHEAD_S)
    return Limits(
        timeout_s=STARTUP_S + budget,
        memory_mb=max(settings.memory_mb, Limits().memory_mb),
        output_bytes=4096 + FIXED_LINE_BYTES * len(tests) + 2 * VALUE_BUDGET,
        supervise=True,  # programs run as a user that cannot signal, stop or prlimit the harness
    )


@dataclass(frozen=True)
class Report:
    """What the harness printed: whether it started and ended, and the per-test reports seen."""

    started: bool
    ended: bool
    tests: dict[int, dict[str, Any]]
    supervised: bool = True  # the harness's test children ran as the sandbox's program user


def parse_report(stdout: str, nonce: str, n_tests: int) -> Report:
    """Read the nonce-marked lines; anything else (whatever a program might print) is ignored."""
    prefix = nonce + " "
    started = ended = False
    supervised = True
    tests: dict[int, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            obj = json.loads(line[len(prefix) :])
        except ValueError:
            continue  # a line cut short by the output cap
        if obj.get("event") == "start":
            started = True
            supervised = isinstance(obj.get("program_uid"), int)
        elif obj.get("event") == "end":
            ended = True
        elif isinstance(obj.get("i"), int) and 0 <= obj["i"] < n_tests:
            tests[obj["i"]] = obj
    return Report(started, ended, tests, supervised)


def complete_reports(report: Report, n_tests: int, sandbox_said: str) -> list[dict[str, Any]]:
    """One report per test, or HarnessError when the grader (not the program) failed.

    Programs run as a user that cannot signal, stop or `prlimit` the harness (a harness the sandbox
    did not run supervised is the grader's failure). Whatever else a program does (take its
    container down, exhaust what the container shares), a failure of the harness after a program
    ran is charged to the program: the test it was running fails (`grader_killed`, a runtime
    error) and the ones after are `skipped`; never an `error`, which training would leave out.
    Only a harness that never started, or that failed before any program ran, is an `error`."""
    if not report.started:
        raise HarnessError(f"the harness did not start ({sandbox_said})")
    if not report.supervised:
        raise HarnessError(f"the sandbox did not run the harness supervised ({sandbox_said})")
    internal = sorted(i for i, r in report.tests.items() if r.get("status") == "internal_error")
    if internal and internal[0] == 0:
        raise HarnessError(f"the harness failed: {report.tests[0].get('detail')} ({sandbox_said})")
    if internal:  # after a program ran: its doing, as far as anyone can tell
        failed = report.tests[internal[0]].get("detail")
        tests = {i: r for i, r in report.tests.items() if i < internal[0]}
        return complete_reports(Report(True, False, tests), n_tests, f"the harness failed: {failed}; {sandbox_said}")
    if report.ended and len(report.tests) == n_tests:
        return [report.tests[i] for i in range(n_tests)]
    out, charged = [], False
    for i in range(n_tests):
        if i in report.tests:
            out.append(report.tests[i])
        elif not charged:
            out.append(
                {"status": "grader_killed", "detail": f"the test harness was killed or stopped ({sandbox_said})"}
            )
            charged = True
        else:
            out.append({"status": "skipped"})
    return out


def run_chunk(
    sandbox: Any, source: str, tests: Sequence[Test], settings: RunSettings, wall_s: float | None = None
) -> list[dict[str, Any]]:
    """One sandbox call running `tests` against `source`, for at most `wall_s` seconds (default:
    `settings.max_wall_s`); raises HarnessError on sandbox trouble."""
    wall_s = settings.max_wall_s if wall_s is None else wall_s
    spec = {
        "source": source,
        "tests": [spec_entry(t, settings) for t in tests],
        "memory_mb": settings.memory_mb,
        "output_cap": settings.output_cap,
        "fail_fast": settings.fail_fast,
        "value_budget": VALUE_BUDGET,
        "wall_s": wall_s,
    }
    # The expectations travel with the judged code, to the outer process only (harness_expect).
    expected = {str(i): e for i, t in enumerate(tests) if (e := expectation(t))} if settings.fail_fast else {}
    nonce = secrets.token_hex(16)
    try:
        result = sandbox.run(
            files={**harness_files(), SPEC_FILE: json.dumps(spec)},
            command=["python3", "-c", HARNESS_MAIN, SPEC_FILE],
            stdin=nonce + "\n" + json.dumps(judged_code(tests)) + "\n" + json.dumps(expected) + "\n",
            limits=call_limits(tests, settings, wall_s),
        )
    except Exception as exc:  # noqa: BLE001 - any failure of the sandbox is the grader's, not the program's
        raise HarnessError(f"sandbox call failed: {type(exc).__name__}: {exc}") from exc
    if result.status is Status.UNAVAILABLE:
        raise HarnessError(f"sandbox unavailable: {result.detail or result.stderr[-300:]}")
    said = f"sandbox status {result.status}, exit code {result.exit_code}, {result.wall_time:.1f}s" + (
        f": {(result.detail or result.stderr)[-200:]}" if result.status is not Status.OK or result.exit_code else ""
    )
    report = parse_report(result.stdout, nonce, len(tests))
    if getattr(result, "killed_container", False):  # the program's run took its containers down (sandbox.types):
        report = Report(True, False, report.tests)  # charged to the test it was on, as a killed harness is
    return complete_reports(report, len(tests), said)
