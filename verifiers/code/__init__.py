"""Code verifier: runs a model's program against tests in the sandbox.

    from rlvr.verifiers import code
    verdict = code.verify(response, [code.CallTest("add", (1, 2), 3), {"stdin": "1 2", "stdout": "3"}])

Three kinds of tests (`IOTest`, `CallTest`, `AssertTest`, or their dicts via `load_tests`) run
many per sandbox call inside a harness that gives each test a fresh process and its own time
limit. The program only produces values and output; expected values, comparisons and the
verdict never enter its process. Assert tests are converted to calls plus host-side checks
where their code allows (`judged_asserts`); the others run in the harness's judge, a process
without the program's code in which the program's functions are proxies returning plain data
(`harness_judge`). No test is judged in the program's interpreter, where the program could
forge it, so `info["trust"]` is always "isolated". Scoring is all-or-nothing or the fraction passed;
`verdict.info["tests"]` lists each test's outcome; sandbox trouble is `Outcome.ERROR`, never a 0.
"""

from rlvr.verifiers.code.cases import (
    AssertTest,
    CallTest,
    IOTest,
    Test,
    TestSpecError,
    dump_test,
    load_test,
    load_tests,
)
from rlvr.verifiers.code.check import SCORINGS, VERSION, run_tests, score_outcomes, verify
from rlvr.verifiers.code.compare import TestOutcome, TestStatus, Trust, values_equal
from rlvr.verifiers.code.extract import code_blocks, extract_program
from rlvr.verifiers.code.harness import HarnessError, RunSettings
from rlvr.verifiers.code.harness_run import normalize_stdout

__all__ = [
    "AssertTest",
    "CallTest",
    "HarnessError",
    "IOTest",
    "RunSettings",
    "SCORINGS",
    "Test",
    "TestOutcome",
    "TestStatus",
    "Trust",
    "TestSpecError",
    "VERSION",
    "code_blocks",
    "extract_program",
    "load_test",
    "load_tests",
    "normalize_stdout",
    "run_tests",
    "score_outcomes",
    "dump_test",
    "values_equal",
    "verify",
]
