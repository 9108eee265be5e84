"""rlvr.verifiers.code: extraction, test loading, judging (pure), and the verifier against the real
Docker sandbox, hostile programs included."""

from __future__ import annotations

import json
import time

import pytest

from rlvr.sandbox.types import Limits, Status
from rlvr.verifiers import code
from rlvr.verifiers.code import harness as code_harness
from rlvr.verifiers.code.compare import grade
from rlvr.verifiers.verdict import Outcome, VerifierError
from tests.conftest import require

ADD_PROGRAM = """
import sys

def add(a, b):
    return a + b

if __name__ == "__main__":
    a, b = map(int, sys.stdin.read().split())
    print(add(a, b))
"""
ADD_TESTS = [
    {"stdin": "1 2\n", "stdout": "3\n"},
    {"fn": "add", "args": [20, 22], "expected": 42},
    {"assert": "assert add(-1, 1) == 0"},
]


def fence(program: str) -> str:
    return f"Here you go:\n```python\n{program.strip()}\n```\nDone."


class CountingSandbox:
    """The real sandbox, counting the calls made to it."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def run(self, **kwargs):
        self.calls += 1
        return self.inner.run(**kwargs)


# ---- extraction ----------------------------------------------------------------------------
def test_extract_takes_the_last_python_block_and_skips_other_languages():
    text = "```python\nprint(1)\n```\nthen\n```\nprint(2)\n```\noutput:\n```text\n2\n```"
    assert code.extract_program(text) == "print(2)\n"
    assert code.code_blocks(text)[2] == ("text", "2\n")


def test_extract_unclosed_last_fence_is_not_a_block():
    assert code.extract_program("```python\nprint(1)\n```\n```python\nprint(2") == "print(1)\n"
    assert code.extract_program("```python\nprint(2") is None
    assert code.extract_program("no code at all") is None
    assert code.extract_program("```python\n\n```") is None  # an empty block is no program


def test_extract_longer_fences_and_tildes():
    assert code.extract_program("````py\nx = '```'\nprint(x)\n````") == "x = '```'\nprint(x)\n"
    assert code.extract_program("~~~python3\nprint(3)\n~~~") == "print(3)\n"


def test_extract_configured_function():
    text = (
        "```python\ndef helper():\n    pass\n```\n"
        "```python\ndef solve(x):\n    return x\n```\n```python\nprint(solve(1))\n```"
    )
    assert code.extract_program(text, function="solve") == "def solve(x):\n    return x\n"
    bare = "import math\nSure:\n\n    def area(r):\n        return math.pi * r * r\n\nThat is all."
    assert code.extract_program(bare, function="area") == "import math\ndef area(r):\n    return math.pi * r * r\n"
    assert code.extract_program(bare, function="missing") is None


@pytest.mark.timeout(20)
def test_extract_is_linear_on_hostile_input():
    hostile = "```python\n" * 200_000 + "x" * 1_000_000
    start = time.perf_counter()
    assert code.extract_program(hostile) is None
    assert code.extract_program(hostile, function="f") is None
    assert time.perf_counter() - start < 10  # generous: a quadratic scan would take hours


# ---- test specs ------------------------------------------------------------------------------
def test_load_tests_reads_every_shape():
    tests = code.load_tests(
        [
            {"input": "1 2", "output": "3"},
            {"stdin": "", "expected_stdout": "x", "timeout_s": 2},
            {"fn_name": "f", "input": [[1, 2], (3, 4)], "output": (1, 2)},
            {"function": "g", "args": [], "kwargs": {"k": 1}, "expected": {"1": 2}},
            {"test": "assert f(1)"},
            {"kind": "assert", "code": "check(f)"},
            code.IOTest("a", "b"),
            {"fn": "h", "args": [], "expected": 1, "rel_tol": 1e-6, "abs_tol": 0},
        ]
    )
    assert [t.kind for t in tests] == ["io", "io", "call", "call", "assert", "assert", "io", "call"]
    assert (tests[7].rel_tol, tests[7].abs_tol) == (1e-6, 0.0) and tests[2].rel_tol is tests[2].abs_tol is None
    assert tests[1].timeout_s == 2
    # Stored as their JSON round trip: tuples become lists.
    assert tests[2].args == ([1, 2], [3, 4]) and tests[2].expected == [1, 2]
    assert tests[3].kwargs == {"k": 1}
    assert all(code.load_test(code.dump_test(t)) == t for t in tests)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"stdin": "1"}, "expected output"),
        ({"fn": "f", "args": [1]}, "expected"),
        ({"fn": "not a name", "args": [], "expected": 1}, "function name"),
        ({"fn": "f", "args": [{1, 2}], "expected": 1}, "JSON-serialisable"),
        ({"fn": "f", "args": 5, "expected": 1}, "list or tuple"),
        ({"fn": "f", "args": [], "expected": {1: 99, "1": 2}}, "both '1' in JSON"),  # keys that collapse
        ({"fn": "f", "args": [{"a": {True: 1, "true": 2}}], "expected": 1}, "both 'true' in JSON"),
        ({"fn": "f", "args": [], "expected": 1, "rel_tol": -1}, "rel_tol"),
        ({"fn": "f", "args": [], "expected": 1, "abs_tol": True}, "abs_tol"),
        ({"fn": "f", "args": [], "expected": 1, "abs_tol": float("inf")}, "abs_tol"),
        ({"stdin": "1", "stdout": "1", "rel_tol": 0.1}, "call tests only"),
        ({"assert": "   "}, "empty"),
        ({"stdin": "1", "stdout": "1", "timeout_s": -1}, "timeout_s"),
        ({"kind": "fuzz", "stdin": "1"}, "unknown test kind"),
        ({"nothing": 1}, "cannot tell"),
    ],
)
def test_malformed_tests_raise_typed_errors_naming_the_index(bad, message):
    with pytest.raises(code.TestSpecError, match=message) as err:
        code.load_tests([{"stdin": "", "stdout": ""}, bad])
    assert str(err.value).startswith("test 1:")
    assert isinstance(err.value, VerifierError)


def test_load_tests_rejects_non_lists():
    for bad in ("assert 1", {"stdin": "1"}, 3):
        with pytest.raises(code.TestSpecError):
            code.load_tests(bad)


# ---- judging (pure) --------------------------------------------------------------------------
FACTORIAL_20 = 2432902008176640000
FIB_100 = 354224848179261915075


@pytest.mark.parametrize(
    "got, expected, equal",
    [
        (3, 3, True),
        (3, 3.0, True),
        (0.1 + 0.2, 0.3, True),
        (1e-20, 0.0, True),
        (1.0, 1.001, False),
        (True, 1, False),
        (1, True, False),
        (True, True, True),
        (None, None, True),
        (None, 0, False),
        ("1", 1, False),
        ([1, [2, 3]], [1, [2, 3]], True),
        ([1, 2], [2, 1], False),
        ([1], [1, 1], False),
        ({"a": 1}, {"b": 1}, False),
        (float("nan"), float("nan"), True),
        # an int expectation is exact: no float passes it, however close (or equal) its value
        (3.0, 3, False),
        ({"a": [1.0]}, {"a": [1]}, False),
        (float(FACTORIAL_20), FACTORIAL_20, False),
        (FACTORIAL_20 + 10**9, FACTORIAL_20, False),
        (round(((1 + 5**0.5) / 2) ** 100 / 5**0.5), FIB_100, False),
        (1e9 + 0.5, 10**9, False),
        (10**400 + 1, 10**400, False),
        (10**400, 10**400, True),
        # admitted values never raise: an int beyond float range against a float, an infinity
        (10**400, 1.5, False),
        (1.5, 10**400, False),
        (10**400, float("inf"), False),
        (-(10**400), float("-inf"), False),
        (float("inf"), float("inf"), True),
        (float("-inf"), float("inf"), False),
        (float("nan"), 1, False),
        (10**308 * 2, 1.7e308, False),
        (2 * 10**308, [1.0], False),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_values_equal_worked_examples(got, expected, equal):
    assert code.values_equal(got, expected) is equal


@pytest.mark.parametrize(
    "got, expected, tolerance, equal",
    [
        (10**9 + 1, 10**9, {"rel_tol": 1e-8}, True),  # an opted-in tolerance covers ints too
        (1e9 + 0.5, 10**9, {"abs_tol": 1}, True),
        (1e9 + 2, 10**9, {"abs_tol": 1}, False),
        (10**400 + 1, 10**400, {"rel_tol": 1e-9}, True),  # compared exactly, beyond float range
        (10**400, 1e308, {"rel_tol": 0.5}, False),
        (10**400, float("inf"), {"rel_tol": 1.0}, False),
        (1.001, 1.0, {"rel_tol": 0.0}, False),  # and a tolerance of 0 is exact
        ([1.0, {"k": 2.0000001}], [1, {"k": 2}], {"rel_tol": 1e-6}, True),
        (True, 1, {"abs_tol": 1}, False),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_values_equal_with_a_tolerance_the_test_opts_into(got, expected, tolerance, equal):
    assert code.values_equal(got, expected, **tolerance) is equal


def test_call_tests_compare_ints_exactly_unless_they_opt_into_a_tolerance():
    done = {"status": "done", "exit_code": 0, "time_s": 0.01}

    def status(test, body):
        return grade(0, test, {**done, "result": {"tag": "values", "body": body}})

    fact = code.CallTest("factorial", (20,), FACTORIAL_20)
    assert status(fact, f"[{FACTORIAL_20}]").passed
    for forged in (float(FACTORIAL_20), float(FACTORIAL_20 + 10**9)):
        outcome = status(fact, f"[{forged!r}]")
        assert outcome.status == "wrong_answer" and "ints compare exactly" in outcome.detail
    tolerant = code.CallTest("f", (), 10**9, abs_tol=1)
    assert status(tolerant, "[1000000000.5]").passed and status(tolerant, "[1000000002.0]").status == "wrong_answer"
    celsius = code.CallTest("c2f", (36.6,), 97.88)  # a float expectation: the default tolerance
    assert status(celsius, f"[{36.6 * 9 / 5 + 32!r}]").passed and status(celsius, "[97.9]").status == "wrong_answer"
    # A value beyond float range where a float is expected: a wrong answer, never an exception.
    huge = status(celsius, "[1" + "0" * 400 + "]")
    assert huge.status == "wrong_answer"
    # Dict keys that collapse in JSON: refused, not merged into whichever value came last.
    keyed = code.CallTest("f", (), {"1": 2})
    assert status(keyed, '[{"d":[[1,99],["1",2]]}]').status == "wrong_answer"
    assert "both '1' in JSON" in status(keyed, '[{"d":[[1,99],["1",2]]}]').detail
    assert status(keyed, '[{"d":[[1,2]]}]').passed


def test_normalize_stdout_collapses_whitespace_but_keeps_lines():
    assert code.normalize_stdout("\n  1   2 \t\n3\n\n") == "1 2\n3"
    assert code.normalize_stdout("1\n2") != code.normalize_stdout("1 2")
    assert code.normalize_stdout("a\r\nb\r\n") == "a\nb"


def test_grade_reads_harness_reports():
    call = code.CallTest("f", (1,), [1, 2])
    done = {"status": "done", "exit_code": 0, "time_s": 0.01}
    assert grade(0, call, {**done, "result": {"tag": "values", "body": "[[1,2]]"}}).passed
    assert grade(0, call, {**done, "result": {"tag": "values", "body": '[{"t":[1,2]}]'}}).passed  # a tuple
    wrong = grade(0, call, {**done, "result": {"tag": "values", "body": "[[2,1]]"}})
    assert wrong.status == "wrong_answer" and "expected [1, 2], got [2, 1]" in wrong.detail
    assert grade(0, call, {**done, "result": None}).status == "runtime_error"
    assert grade(0, call, {"status": "timeout", "time_s": 4.0}).status == "timeout"
    assert grade(0, call, {"status": "grader_killed"}).status == "runtime_error"
    assert grade(0, call, {"status": "skipped"}).status == "skipped"
    judged = code.AssertTest("assert f(1) == 2")
    failing = grade(1, judged, {**done, "result": {"tag": "values", "body": "[3]"}})
    assert failing.status == "wrong_answer" and failing.trust == "isolated"
    assert grade(1, judged, {**done, "result": {"tag": "values", "body": "[2]"}}).passed
    # a "passed" report is not a value: a converted test cannot be passed by saying so
    assert grade(1, judged, {**done, "result": {"tag": "passed", "body": ""}}).status == "invalid_value"
    # test code the host cannot evaluate ran in the harness's judge: its verdict, and still "isolated"
    looped = code.AssertTest("for i in range(3):\n    assert f(i) == i")
    failing = grade(1, looped, {**done, "result": {"tag": "failed", "body": "AssertionError"}})
    assert failing.status == "wrong_answer" and failing.trust == "isolated"
    assert grade(1, looped, {**done, "result": {"tag": "passed", "body": ""}}).passed
    assert grade(1, looped, {**done, "result": {"tag": "invalid", "body": "f(...)"}}).status == "invalid_value"
    assert grade(1, looped, {**done, "result": {"tag": "values", "body": "[0, 1, 2]"}}).status == "runtime_error"
    io = code.IOTest("1 2", "3\n")
    digest = code.harness_run.stdout_digest
    assert grade(0, io, {**done, "stdout_sha256": digest(" 3 \n\n")}).passed
    assert grade(0, io, {**done, "exit_code": 1, "stdout_sha256": digest("3")}).status == "runtime_error"


def test_report_parsing_ignores_unmarked_lines_and_charges_a_killed_harness():
    nonce = "a" * 32
    lines = [
        f"{nonce} " + json.dumps({"event": "start", "program_uid": 10002}),
        "b" * 32 + " " + json.dumps({"i": 1, "status": "done"}),  # forged: wrong nonce
        f"{nonce} " + json.dumps({"i": 0, "status": "done"}),
    ]
    report = code_harness.parse_report("\n".join(lines), nonce, 3)
    assert report.started and not report.ended and sorted(report.tests) == [0]
    full = code_harness.complete_reports(report, 3, "sandbox status ok")
    assert [r["status"] for r in full] == ["done", "grader_killed", "skipped"]
    with pytest.raises(code.HarnessError, match="did not start"):
        code_harness.complete_reports(code_harness.parse_report("", nonce, 3), 3, "sandbox status ok")
    internal = code_harness.parse_report(
        lines[0] + "\n" + f"{nonce} " + json.dumps({"i": 0, "status": "internal_error"}), nonce, 1
    )
    with pytest.raises(code.HarnessError, match="harness failed"):
        code_harness.complete_reports(internal, 1, "ok")
    # after a program ran, a failure of the harness is charged to the program, never an error
    later = code_harness.parse_report(
        "\n".join([lines[0], lines[2], f"{nonce} " + json.dumps({"i": 1, "status": "internal_error"})]), nonce, 3
    )
    assert [r["status"] for r in code_harness.complete_reports(later, 3, "ok")] == ["done", "grader_killed", "skipped"]
    # a harness whose programs could reach it (not run supervised) is the grader's failure
    unsupervised = code_harness.parse_report(f"{nonce} " + json.dumps({"event": "start"}), nonce, 1)
    with pytest.raises(code.HarnessError, match="supervised"):
        code_harness.complete_reports(unsupervised, 1, "ok")


def test_chunks_respect_count_and_time_caps():
    settings = code.RunSettings(timeout_s=10, max_tests_per_call=3, max_seconds_per_call=25)
    tests = [code.IOTest("", "")] * 7
    assert code_harness.chunks(tests, settings) == [[0, 1], [2, 3], [4, 5], [6]]
    assert code_harness.chunks(tests, code.RunSettings(max_tests_per_call=3)) == [[0, 1, 2], [3, 4, 5], [6]]


def test_verify_rejects_misuse_and_reports_format_errors_without_a_sandbox():
    with pytest.raises(VerifierError, match="no tests"):
        code.verify(fence("print(1)"), [])
    with pytest.raises(VerifierError, match="scoring"):
        code.verify(fence("print(1)"), ADD_TESTS, scoring="most")
    verdict = code.verify("I would write a loop.", ADD_TESTS, sandbox=object())
    assert verdict.outcome is Outcome.FORMAT_ERROR and verdict.score == 0.0


# ---- against the real sandbox ----------------------------------------------------------------
def test_all_three_kinds_pass_in_one_sandbox_call(box):
    counting = CountingSandbox(box)
    verdict = code.verify(fence(ADD_PROGRAM), ADD_TESTS, sandbox=counting)
    assert (verdict.score, verdict.outcome) == (1.0, Outcome.CORRECT), verdict.detail
    assert counting.calls == 1
    assert [t["status"] for t in verdict.info["tests"]] == ["passed"] * 3
    assert verdict.info["passed"] == 3 and verdict.info["total"] == 3


def test_wrong_program_all_or_nothing_and_fraction(box):
    # Multiplies positive numbers: io 1*2 = 2 (wrong), call 20*22 = 440 (wrong), assert -1+1 = 0 (right).
    wrong = ADD_PROGRAM.replace("return a + b", "return a * b if a > 0 else a + b")
    frac = code.verify(fence(wrong), ADD_TESTS, sandbox=box, scoring="fraction")
    assert frac.outcome is Outcome.INCORRECT and frac.score == pytest.approx(1 / 3)
    statuses = [t["status"] for t in frac.info["tests"]]
    assert statuses == ["wrong_answer", "wrong_answer", "passed"]
    assert "expected '3\\n', got '2\\n'" in frac.info["tests"][0]["detail"]
    assert "add(20, 22): expected 42, got 440" in frac.info["tests"][1]["detail"]
    strict = code.verify(fence(wrong), ADD_TESTS, sandbox=box)
    assert (strict.score, strict.outcome) == (0.0, Outcome.INCORRECT)


def test_each_test_has_its_own_time_limit(box):
    program = "import time\ndef f(x):\n    if x == 2:\n        time.sleep(30)\n    return x\n"
    tests = [code.CallTest("f", (1,), 1), code.CallTest("f", (2,), 2, timeout_s=0.5), code.CallTest("f", (3,), 3)]
    start = time.monotonic()
    verdict = code.verify(fence(program), tests, sandbox=box, scoring="fraction")
    assert time.monotonic() - start < 15
    assert [t["status"] for t in verdict.info["tests"]] == ["passed", "timeout", "passed"]
    assert verdict.score == pytest.approx(2 / 3)


def test_fail_fast_skips_the_rest_after_a_visible_failure(box):
    tests = [code.AssertTest("assert False"), code.AssertTest("assert True")]
    verdict = code.verify(fence("x = 1"), tests, sandbox=box)
    assert [t["status"] for t in verdict.info["tests"]] == ["wrong_answer", "skipped"]


def test_call_returns_are_compared_after_a_json_round_trip(box):
    program = "def f():\n    return (1, {2: 'a'}, 0.30000000000000004)\ndef g():\n    return {1, 2}\n"
    tests = [code.CallTest("f", (), [1, {"2": "a"}, 0.3]), code.CallTest("g", (), [1, 2])]
    verdict = code.verify(fence(program), tests, sandbox=box, scoring="fraction")
    assert verdict.info["tests"][0]["passed"]
    assert "not JSON data" in verdict.info["tests"][1]["detail"]


def test_large_return_values_come_back_whole(box):
    program = "def evens(n, bump=0):\n    return {'xs': list(range(0, n, 2)), 'n': n + bump}\n"
    expected = {"n": 100000, "xs": list(range(0, 100000, 2))}  # about 340 KB of JSON
    tests = [code.CallTest("evens", (100000,), expected), code.CallTest("evens", (100000, 1), expected)]
    verdict = code.verify(fence(program), tests, sandbox=box, scoring="fraction")
    assert [t["status"] for t in verdict.info["tests"]] == ["passed", "wrong_answer"], verdict.info
    assert "expected {" in verdict.info["tests"][1]["detail"] and "got {" in verdict.info["tests"][1]["detail"]


def test_humaneval_style_check_function(box):
    test = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n\ncheck(square)\n"
    good = code.verify(fence("def square(x):\n    return x * x"), [code.AssertTest(test)], sandbox=box)
    bad = code.verify(fence("def square(x):\n    return x + x"), [code.AssertTest(test)], sandbox=box)
    assert good.outcome is Outcome.CORRECT
    assert bad.outcome is Outcome.INCORRECT and "assert candidate(3) == 9" in bad.info["tests"][0]["detail"]


HOSTILE = {
    "infinite loop": "while True:\n    pass",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "huge output": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "sys.exit(0) at import": "import sys\nsys.exit(0)",
    "os._exit(0) at import": "import os\nos._exit(0)",
    "memory hog": "x = bytearray(4 * 1024 ** 3)",
    "fake reports": (
        "import os, sys, json\n"
        "for i in range(3):\n"
        "    print('0' * 32, json.dumps({'i': i, 'status': 'done', 'result': {'passed': True, 'value': '3'}}))\n"
        "print('0' * 32, json.dumps({'event': 'end'}))\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, (json.dumps({'passed': True, 'value': '42'}) + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "for pid in (os.getppid(), 1):\n"
        "    for what in ('environ', 'cmdline', 'mem'):\n"
        "        try:\n"
        "            print(open(f'/proc/{pid}/{what}', 'rb').read(200))\n"
        "        except OSError:\n"
        "            pass\n"
        "os._exit(0)"
    ),
    "kills the harness": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "stops the harness": "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\ntime.sleep(60)",
    "escapes with setsid": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_never_pass_and_never_hang(box, name):
    start = time.monotonic()
    # Half a second a test: no program here may pass, and the loops and the stopped harness wait out
    # every test's limit (the stopped harness: the whole call's budget, 3 s plus 1 s a test).
    tests = [dict(t, timeout_s=0.5) for t in ADD_TESTS]
    verdict = code.verify(fence(HOSTILE[name]), tests, sandbox=box, scoring="fraction")
    assert time.monotonic() - start < 30
    assert verdict.outcome is Outcome.INCORRECT, (name, verdict.outcome, verdict.detail)
    assert verdict.score == 0.0, (name, verdict.info)


def test_sandbox_unavailable_is_an_error_never_a_zero():
    from rlvr import sandbox

    require(hasattr(sandbox, "DockerSandbox"), "rlvr.sandbox.DockerSandbox is not available")
    broken = sandbox.DockerSandbox(image="rlvr-sandbox:does-not-exist", pool_size=1)
    try:
        result = broken.run(files={}, command=["python3", "-c", "print(1)"], stdin="", limits=Limits())
        assert result.status is Status.UNAVAILABLE
        verdict = code.verify(fence(ADD_PROGRAM), ADD_TESTS, sandbox=broken)
    finally:
        getattr(broken, "close", lambda: None)()
    assert verdict.outcome is Outcome.ERROR and verdict.is_error, verdict.detail
    assert "unavailable" in verdict.detail


def test_return_values_share_one_output_budget_per_call(box):
    # 8 tests of 900 KB each: each under the per-test cap, together over the call's budget
    tests = [code.CallTest("big", (i,), "x" * 900_000) for i in range(8)]
    verdict = code.verify(fence("def big(i):\n    return 'x' * 900_000"), tests, sandbox=box, scoring="fraction")
    statuses = [t["status"] for t in verdict.info["tests"]]
    budget_tests = code_harness.VALUE_BUDGET // 900_000
    assert statuses == ["passed"] * budget_tests + ["output_limit"] * (8 - budget_tests), statuses
    assert verdict.outcome is Outcome.INCORRECT
