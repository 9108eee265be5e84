"""The harness's early stop on a wrong value (standard library only; shipped next to
`harness_program.py` and `values.py`, and imported on the host too).

Fail-fast used to stop a call only on what the sandbox could see (a crash, a timeout), so a wrong
program that took its time on every test held one verification for the sum of the tests' limits.
Now the host sends the harness's *outer* process, on its stdin (as it sends the judged tests'
code: no process running the program ever holds it), an expectation per test where one can be
decided exactly, and the outer process tells the worker to stop at the first report that is
surely wrong. The host still judges every report itself; this only ends the call early, so an
expectation must never call a value wrong that the host would pass:
- `stdout`: a stdin/stdout test's normalised-output digest (the host compares exactly that);
- `json`: a call test without a tolerance whose expected value holds no float: the host's
  comparison is then exact, type for type, on the JSON form (`strictly_equal`);
- `eq`: a converted assert test that is one `assert f(...) == constant`: Python's `==` on the
  decoded value, as the host evaluates it.
Anything else (floats, tolerances, other checks) has no expectation and runs to its end.
"""

from __future__ import annotations

import json

if __package__:  # imported on the host
    from rlvr.verifiers.code import values
else:  # in the sandbox, next to values.py
    import values


def strictly_equal(a: object, b: object) -> bool:
    """Equality of JSON-form values without floats, type for type (True is not 1). Recursion is
    bounded by `values.MAX_DEPTH`."""
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(strictly_equal(a[k], b[k]) for k in a)
    return a == b


def surely_wrong(line: str, expectations: dict) -> bool:
    """Whether the worker's report `line` is a test that the host will surely fail. Never
    raises: a report it cannot read is left to the host (the worker stops on visible failures)."""
    try:
        report = json.loads(line)
        expected = expectations.get(str(report.get("i")))
        if expected is None or report.get("status") != "done":
            return False
        if "stdout" in expected:
            return report.get("exit_code") == 0 and report.get("stdout_sha256") != expected["stdout"]
        result = report.get("result")
        if not isinstance(result, dict) or result.get("tag") != "values":
            return False
        try:
            got = values.decode(result["body"])
        except values.NotPlainData:
            return True  # the host refuses it too: an invalid value
        if type(got) is not list or len(got) != 1:
            return True  # one call's value was due
        if "json" in expected:
            try:
                form = values.json_form(got[0])
            except (TypeError, ValueError):  # not JSON data, keys that collide: wrong on the host too
                return True
            return not strictly_equal(form, values.decode(expected["json"]))
        return not bool(got[0] == values.decode(expected["eq"]))
    except Exception:  # noqa: BLE001 - out of memory, a report cut short: the host decides
        return False
