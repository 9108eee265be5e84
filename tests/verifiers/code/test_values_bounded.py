"""rlvr.verifiers.code's decoding and host-side checks in linear time: values whose members share one hash
(a hash flood) are refused, repeated members that encode never writes are refused, and the judge-side evaluation of
converted asserts stays bounded in time and memory and raises only printable errors."""

from __future__ import annotations

import time

import pytest

from rlvr.verifiers import code
from rlvr.verifiers.code import values as code_values
from rlvr.verifiers.code.compare import grade

MERSENNE = 2**61 - 1  # ints hash modulo this prime: all its multiples hash to 0


def colliding(kind: str, n: int) -> list:
    """n distinct values of one type that all share one hash value."""
    if kind == "int":
        return [k * MERSENNE for k in range(1, n + 1)]
    if kind == "float":  # 2**61 is 1 modulo the prime: b * 2**(61 j) all hash to b
        return [3 * 2.0 ** (61 * j) for j in range(-(n // 2), n - n // 2)]
    if kind == "tuple":
        return [(k * MERSENNE, "x") for k in range(1, n + 1)]
    if kind == "frozenset":
        return [frozenset({k * MERSENNE}) for k in range(1, n + 1)]
    return [complex(x, 1.0) for x in colliding("float", n)]


@pytest.mark.parametrize("kind", ["int", "float", "tuple", "frozenset", "complex"])
def test_sets_and_dicts_whose_members_share_a_hash_are_refused(kind):
    crowd = colliding(kind, 30)
    assert len(set(crowd)) == 30 and len({hash(x) for x in crowd}) == 1
    few = crowd[: code_values.MAX_SAME_HASH]
    assert code_values.decode(code_values.encode(set(few))) == set(few)  # a few collisions: honest data has them
    assert code_values.decode(code_values.encode(dict.fromkeys(few, 0))) == dict.fromkeys(few, 0)
    for value in (set(crowd), frozenset(crowd), dict.fromkeys(crowd, 0), [1, {"k": (set(crowd),)}]):
        with pytest.raises(code_values.HashFlood):
            code_values.decode(code_values.encode(value))


def test_decode_refuses_repeated_members_that_encode_never_writes():
    for text in ('{"s":[1,1]}', '{"s":[1,true]}', '{"fs":[2,2.0]}', '{"d":[[1,"a"],[1,"b"]]}'):
        with pytest.raises(code_values.NotPlainData, match="repeated"):
            code_values.decode(text)
    nans = code_values.decode(code_values.encode({float("nan"), float("nan")}))  # two NaNs are two members
    assert len(nans) == 2


@pytest.mark.timeout(60)
def test_decoding_colliding_members_is_linear():
    ints = colliding("int", 100_000)
    texts = [
        '{"s":[' + ",".join(map(str, ints)) + "]}",
        '{"d":[' + ",".join(f"[{i},0]" for i in ints) + "]}",
        '{"fs":[' + ",".join(repr(x) for x in colliding("float", 30)) + "]}",
    ]
    start = time.monotonic()
    for text in texts:
        with pytest.raises(code_values.HashFlood):
            code_values.decode(text)
    assert time.monotonic() - start < 10  # about 0.5 s; Python's own set() of these takes minutes


@pytest.mark.timeout(60)
def test_host_side_checks_refuse_colliding_values_in_linear_time():
    from rlvr.verifiers.code import judged_asserts as ja

    ints = colliding("int", 100_000)
    start = time.monotonic()
    for check in (
        "assert set(f(1)) == {1}",
        "assert frozenset(f(1)) == frozenset()",
        "assert dict(f(1)) == {}",
        "assert set(f(1)) - set(f(2)) == set()",
    ):
        judged = ja.convert(check)
        pairs = [(i, 0) for i in ints]
        with pytest.raises(code_values.HashFlood):
            ja.evaluate(judged, [pairs if "dict" in check else ints] * len(judged.calls))
    assert time.monotonic() - start < 10
    # Python's semantics otherwise: repeats count once, and a few collisions are fine.
    ja.evaluate(ja.convert(f"assert set(f(1)) == {{0, {MERSENNE}}}"), [[0] * 1000 + [MERSENNE] * 1000])
    ja.evaluate(ja.convert("assert len(dict(f(1))) == 8"), [[(i, 0) for i in ints[:8]] * 50])
    done = {"status": "done", "exit_code": 0, "time_s": 0.01}
    body = "[[" + ",".join(map(str, ints)) + "]]"
    outcome = grade(0, code.AssertTest("assert set(f(1)) == {1}"), {**done, "result": {"tag": "values", "body": body}})
    assert outcome.status == "invalid_value" and "share a hash value" in outcome.detail


def test_host_side_checks_stay_bounded_and_raise_only_printable_errors():
    from rlvr.verifiers.code import judged_asserts as ja

    start = time.monotonic()
    ja.evaluate(ja.convert("assert sum(f(1), []) == list(range(200000))"), [[[i] for i in range(200_000)]])
    ja.evaluate(ja.convert("assert round(f(1), -10**400) == 0"), [5])  # Python would build 10**(10**400)
    ja.evaluate(ja.convert("assert round(f(1), -1) == 0 and round(f(2), -1) == 20"), [5, 15])
    with pytest.raises(TypeError, match="concatenate list"):
        ja.evaluate(ja.convert("assert sum(f(1), []) == []"), [[(1,)]])
    for check, value in (
        ("x = f(1)\nassert " + " * ".join(["x"] * 20) + " > 0", 10**4000),  # 265,000 bits
        ("assert 3 ** f(1) > 0", 10**6),
    ):
        with pytest.raises(MemoryError):
            ja.evaluate(ja.convert(check), [value])
    with pytest.raises(RuntimeError, match="KeyError"):  # its message, an int of 5,000 digits, cannot print
        ja.evaluate(ja.convert("x = f(1)\nassert {x: 1}[x * 10**1000] == 1"), [10**4000])
    with pytest.raises(OverflowError):  # as Python raises it; the verdict makes it a runtime error
        ja.evaluate(ja.convert("import math\nassert math.isclose(f(1), 1.0)"), [10**400])
    assert time.monotonic() - start < 10
