"""The host-side evaluation of converted assert tests (`judged_asserts`): the whitelist of what their
code may use (builtins, `math` names, operators) and a small interpreter over it, run on the values
the program returned. It never runs test code as Python and never lets the program near the verdict.

Evaluation (`judged_asserts.evaluate`) is bounded in time by the size of the values, whatever the
program returned; where Python itself would take quadratic or unbounded time it refuses instead, and why:
- `set(...)`, `frozenset(...)`, `dict(...)` and set or dict displays check their members first
  (`values.check_hash_spread`, equal members counted once): more than a few distinct members
  sharing one hash value (100,000 multiples of 2**61 - 1 in a returned list) raise
  `values.HashFlood`, an `invalid_value` of the program, instead of minutes of probing;
- `sum(lists, [])` concatenates in linear time (Python's sum copies the partial list each step);
- an int `*` or `**` may build at most MAX_INT_BITS bits, a sequence `*` or `range` at most
  MAX_BUILT items, and `round(n, -k)` with k beyond n's digits is 0 without building 10**k;
- any other failure is the exception Python would raise (its message made printable), which the
  verdict turns into a runtime error: nothing raised here escapes as a crash of the judge.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
from typing import Any

from rlvr.verifiers.code import values

MAX_BUILT = 10_000_000  # elements a sequence `*` or a `range` in test code may build
MAX_INT_BITS = 1 << 18  # bits an int `*` or `**` may build (returned ints have at most about 14,000)
# Helper functions test code may call (on the host), and type names it may name (for isinstance).
BUILTINS: dict[str, Any] = {
    f.__name__: f
    for f in (
        abs,
        all,
        any,
        bool,
        float,
        frozenset,
        int,
        isinstance,
        len,
        list,
        max,
        min,
        round,
        set,
        sorted,
        str,
        sum,
        tuple,
        dict,
    )
}


def _range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_BUILT:
        raise MemoryError("the test builds a range that is too large")
    return r


def _sum(items: Any, start: Any = 0, /) -> Any:
    """Python's sum; a list or tuple start concatenates in linear time, not quadratic."""
    if type(start) not in (list, tuple):
        return sum(items, start)
    out = list(start)
    for item in items:
        if type(item) is not type(start):
            name = type(start).__name__
            raise TypeError(f'can only concatenate {name} (not "{type(item).__name__}") to {name}')
        out.extend(item)
        if len(out) > MAX_BUILT:
            raise MemoryError("the test builds a sequence that is too large")
    return type(start)(out)


def _round(number: Any, ndigits: Any = None) -> Any:
    """Python's round; an int rounded at more digits than it has is 0 (Python would first build
    10**-ndigits: `round(5, -10**400)` never returns)."""
    if isinstance(number, int) and isinstance(ndigits, int) and -ndigits > number.bit_length() + 1:
        return 0  # |number| < 2**bits, and 10**-ndigits > 2**(bits + 1): rounds to 0
    return round(number, ndigits)


def _pow(base: Any, exp: Any, mod: Any = None, /) -> Any:
    """Python's pow, refusing what would build a huge number (as `**` does here)."""
    return pow(base, exp, mod) if mod is not None else _binop(ast.Pow, base, exp)


BUILTINS.update(range=_range, sum=_sum, round=_round, pow=_pow)
BUILTINS.update({f.__name__: f for f in (ord, chr, divmod, hex, bin, oct)})  # linear in their input's size
# Every name Python's builtins define is Python's, never the program's: in `assert power(2, 10) ==
# pow(2, 10)` the program must not supply `pow`. Those outside BUILTINS leave the test unconverted,
# for the judge, where they are Python's own (harness_judge proxies no builtin's name).
PYTHON_NAMES = frozenset(vars(builtins))
TYPES = {
    "int": int,
    "float": float,
    "str": str,
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "set": set,
    "bool": bool,
    "frozenset": frozenset,
    "bytes": bytes,
    "complex": complex,
}
MATH = {
    name: getattr(math, name)
    for name in ("isclose", "sqrt", "fabs", "floor", "ceil", "isnan", "isinf", "isfinite", "pi", "e", "inf")
}
KEYWORDS = {"isclose": {"rel_tol", "abs_tol"}, "sorted": {"reverse"}, "round": {"ndigits"}}
BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
CMPOPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
UNARY = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}


# Not an RlvrError: control flow of `judged_asserts.convert`, which returns None on it (never escapes).
class Unsupported(Exception):
    """The test code is outside the convertible subset (it then runs in the harness's judge)."""


def assign(target: ast.expr, value: Any, env: dict[str, Any]) -> None:
    """Bind `value` in `env` to an assignment's target: a name, or a tuple of names (unpacked)."""
    if isinstance(target, ast.Name):
        env[target.id] = value
        return
    items = list(value)
    if len(items) != len(target.elts):
        raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
    for name, item in zip(target.elts, items):
        env[name.id] = item


def eval_expr(node: ast.expr, env: dict[str, Any]) -> Any:
    """The value of a converted expression over `env` (the program's results and assigned names)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        return TYPES.get(node.id) or BUILTINS[node.id]
    if isinstance(node, ast.Attribute):
        return MATH[node.attr]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [eval_expr(e, env) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: _set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return _dict([(eval_expr(k, env), eval_expr(v, env)) for k, v in zip(node.keys, node.values)])
    if isinstance(node, ast.BinOp):
        return _binop(type(node.op), eval_expr(node.left, env), eval_expr(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return UNARY[type(node.op)](eval_expr(node.operand, env))
    if isinstance(node, ast.BoolOp):
        result = None
        for v in node.values:
            result = eval_expr(v, env)
            if (not result) if isinstance(node.op, ast.And) else result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = eval_expr(node.left, env)
        for op, comparator in zip(node.ops, node.comparators):
            right = eval_expr(comparator, env)
            if not CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return eval_expr(node.body, env) if eval_expr(node.test, env) else eval_expr(node.orelse, env)
    if isinstance(node, ast.Subscript):
        return eval_expr(node.value, env)[eval_expr(node.slice, env)]
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else eval_expr(p, env) for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Call):
        fn = eval_expr(node.func, env)
        if isinstance(fn, type):  # set(...), frozenset(...), dict(...): checked first
            fn = _CHECKED.get(fn, fn)
        return fn(*(eval_expr(a, env) for a in node.args), **{k.arg: eval_expr(k.value, env) for k in node.keywords})
    raise Unsupported(type(node).__name__)  # unreachable after conversion


def _binop(op: type, a: Any, b: Any) -> Any:
    """Python's operator, refusing what would build a huge value (`'a' * 10**12`, `9 ** 10**9`)."""
    if op is ast.Mult:
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_BUILT:
                raise MemoryError("the test builds a sequence that is too large")
        if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise MemoryError("the test builds a number that is too large")
    if op is ast.Mod and isinstance(a, (str, bytes)):
        raise TypeError("%-formatting is not supported in judged test code")
    if op is ast.Pow and isinstance(a, int) and isinstance(b, int) and abs(a) > 1 and b > 0:
        if b > MAX_INT_BITS or b * math.log2(abs(a)) > MAX_INT_BITS:
            raise MemoryError("the test builds a number that is too large")
    return BINOPS[op](a, b)


def _set(items: list) -> set:
    values.check_hash_spread(items, distinct=True)
    return set(items)


def _dict(pairs: list[tuple[Any, Any]]) -> dict:
    values.check_hash_spread([k for k, _ in pairs], distinct=True)
    return dict(pairs)


def _checked(kind: type) -> Any:
    """`kind(...)` as Python calls it, with the members checked before they are hashed in."""

    def build(*args: Any) -> Any:
        if len(args) != 1:
            return kind(*args)  # kind() is empty; more arguments: Python's TypeError
        if kind is not dict:
            members = list(args[0])
            values.check_hash_spread(members, distinct=True)
            return kind(members)
        source = args[0]
        return _dict(list(source.items()) if type(source) is dict else [_pair(p, i) for i, p in enumerate(source)])

    return build


def _pair(item: Any, index: int) -> tuple[Any, Any]:
    try:
        pair = tuple(item)
    except TypeError:
        raise TypeError(f"cannot convert dictionary update sequence element #{index} to a sequence") from None
    if len(pair) != 2:
        raise ValueError(f"dictionary update sequence element #{index} has length {len(pair)}; 2 is required")
    return pair


_CHECKED = {kind: _checked(kind) for kind in (set, frozenset, dict)}


def printable(exc: Exception) -> Exception:
    """`exc`, or a RuntimeError naming it when its message cannot be printed (a KeyError of an int
    beyond Python's 4,300-digit str limit): the verdict quotes the message."""
    try:
        str(exc)
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__} (its message cannot be printed)")
