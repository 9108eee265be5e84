"""The host-side judge of code tests, without a sandbox: the plain-data codec (`values`) and the
conversion of assert tests into program calls plus host-evaluated checks (`judged_asserts`)."""

from __future__ import annotations

import math

import pytest

from rlvr.verifiers.code import harness_judge, values
from rlvr.verifiers.code import judged_asserts as ja


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2**200,
        1.5,
        1.0,
        float("inf"),
        "héllo\n",
        b"\x00\xff",
        1 + 2j,
        [1, [2, (3, 4)]],
        (),
        {"a": 1, 2: [3], (1, 2): None},
        {1, 2},
        frozenset({"x"}),
    ],
)
def test_plain_values_round_trip_with_their_exact_types(value):
    back = values.decode(values.encode(value))
    assert back == value and type(back) is type(value)


def test_nan_round_trips_and_int_and_float_stay_apart():
    assert math.isnan(values.decode(values.encode(float("nan"))))
    assert type(values.decode(values.encode(1))) is int and type(values.decode(values.encode(1.0))) is float


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [
        AlwaysEqual(3),
        [1, AlwaysEqual(2)],
        {"k": object()},
        type("S", (str,), {})("x"),
        print,
        (i for i in ()),
        10**5000,
    ],
    ids=["int-subclass", "nested-subclass", "object", "str-subclass", "function", "generator", "huge-int"],
)
def test_foreign_types_and_huge_values_are_not_plain_data(value):
    with pytest.raises(values.NotPlainData):
        values.encode(value)


def test_depth_and_cycles_are_bounded_without_exhausting_the_stack():
    deep = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(values.NotPlainData):
        values.encode(deep)
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(values.NotPlainData):
        values.encode(cycle)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"x": 1}',
        '{"t": 5}',
        '{"d": [[1]]}',
        '{"s": [[1]]}',
        '{"d": [[[1], 2]]}',
        "NaN",
        '{"f": "1.5"}',
        '{"b": "zz"}',
        "9" * 5000,
        "x" * (values.MAX_TEXT + 1),
        '{"t": [1], "s": []}',
    ],
    ids=lambda text: text[:12],
)
def test_decode_refuses_anything_but_well_formed_plain_data(text):
    with pytest.raises(values.NotPlainData):
        values.decode(text)


# ---- conversion -----------------------------------------------------------------------------
def test_mbpp_assert_becomes_a_call_and_a_host_check():
    judged = ja.convert("assert add(2, 3) == 5")
    assert [(c.fn, c.args, c.kwargs) for c in judged.calls] == [("add", "(2, 3)", "{}")]
    ja.evaluate(judged, [5])
    with pytest.raises(AssertionError, match="assert add"):
        ja.evaluate(judged, [6])


def test_humaneval_check_function_is_inlined_with_keywords_and_math():
    code = (
        "import math\nMETADATA = {'author': 'x'}\n\ndef check(candidate):\n"
        "    assert candidate([1, 2.0], k=3) == (1, 2)\n    assert abs(candidate([]) - 0.5) < 1e-6\n"
        "    assert math.isclose(candidate([3]), 1.0, rel_tol=1e-9)\n\ncheck(solve)\n"
    )
    judged = ja.convert(code)
    assert [c.fn for c in judged.calls] == ["solve"] * 3 and judged.calls[0].kwargs == "{'k': 3}"
    ja.evaluate(judged, [(1, 2), 0.5, 1.0])
    with pytest.raises(AssertionError, match="candidate"):  # the detail quotes the test as written
        ja.evaluate(judged, [(1, 2), 0.6, 1.0])


def test_python_semantics_are_kept_exactly():
    is_true = ja.convert("assert f(1) is True")
    ja.evaluate(is_true, [True])
    with pytest.raises(AssertionError):
        ja.evaluate(is_true, [1])  # 1 == True, but 1 is not True
    as_list = ja.convert("assert f(1) == [1, 2]")
    with pytest.raises(AssertionError):
        ja.evaluate(as_list, [(1, 2)])  # a tuple is not equal to a list in Python
    assignment = ja.convert("r = f(10**6)\nassert len(r) == 3 and r[-1] == 9")
    assert assignment.calls[0].args == "(10 ** 6,)"
    ja.evaluate(assignment, [[1, 4, 9]])
    with pytest.raises(IndexError):  # the test would raise on this value: a runtime error
        ja.evaluate(ja.convert("r = f(1)\nassert r[-1] == 9"), [[]])


@pytest.mark.parametrize(
    "code",
    [
        "for i in range(3):\n    assert f(i) == i",  # loops
        "assert f(g) == 1",  # a function passed as a value
        "assert f(1).real == 1",  # attributes of results
        "assert f(x) == 1",  # an unknown name in an argument
        "assert (lambda: 1)() == f(1)",  # lambdas
        "assert f(f(1)) == 2",  # a call of the program inside an argument
        "assert [x for x in f(1)] == [1]",  # comprehensions
        "import os\nassert f(1) == 1",  # imports other than math
        "x = 1\nassert x == 1",  # no call of the program at all
        "def helper(y):\n    return y\nassert f(1) == helper(1)",
        "assert f(*[1]) == 1",
    ],
)
def test_code_outside_the_whitelist_goes_to_the_judge(code):
    assert ja.convert(code) is None


# ---- the harness's judge: its pure parts (the process itself: tests/verifiers/code/test_forge_judge.py) ---
def test_mutated_arguments_are_brought_back_in_place():
    inner, other = [3, 2], [5]
    args = ([inner, 1], {"k": {1, 2}}, (other,), [0])
    for old, new in zip(args, ([[2, 3], 1], {"k": {1}, "n": 2}, ([5, 6],), [0, 1])):
        assert harness_judge._update(old, new)
    assert args == ([[2, 3], 1], {"k": {1}, "n": 2}, ([5, 6],), [0, 1])
    assert args[0][0] is inner and args[2][0] is other  # the test's own objects, changed where they are
    assert not harness_judge._update(5, 6) and not harness_judge._update([1], (1,))


def test_the_programs_exceptions_are_raised_as_builtins_but_never_as_stop_iteration():
    assert type(harness_judge._exception("ValueError", "bad")) is ValueError
    assert str(harness_judge._exception("KeyError", "k")) == "'k'"
    for name in ("StopIteration", "MyError", "SystemExit", "UnicodeDecodeError", "ExceptionGroup"):
        assert type(harness_judge._exception(name, "x")) is harness_judge.ProgramError, name
    assert not isinstance(harness_judge._exception("StopIteration", ""), StopIteration)


def test_the_judge_sees_every_global_name_its_test_code_may_use():
    code = compile(
        "import math\ndef check(c):\n    assert all(c(x) == g(x) for x in range(3))\ncheck(f)\n", "test.py", "exec"
    )
    assert {"math", "check", "f", "all", "range", "g"} <= harness_judge._global_names(code)


def test_test_code_cannot_build_huge_values_on_the_host():
    with pytest.raises(MemoryError):
        ja.evaluate(ja.convert("assert f(1) * 10**9 == []"), [[1, 2, 3]])
    with pytest.raises(MemoryError):
        ja.evaluate(ja.convert("assert f(1) == 9 ** 10**9"), [1])
