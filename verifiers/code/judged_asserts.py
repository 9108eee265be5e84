"""Assert-style tests judged outside the program's reach.

`assert is_palindrome('abba') is True`, MBPP's `assert f(2) == 4`, HumanEval's
`def check(candidate): assert candidate(1) == 2 ...; check(f)`: `convert` reads such test code with
`ast` and splits it into
- the program's calls, with constant arguments: all the sandbox runs (the program then only
  produces values, see `values.py`); and
- the rest of the test (comparisons, `len`, `sorted`, `math.isclose`, ...), which `evaluate` runs
  on the host over the returned values: a small interpreter over a whitelist of syntax, so it
  neither runs test code as Python on the host nor lets the program near the verdict.
Only names that are not Python's builtins are the program's: `assert power(2, 10) == pow(2, 10)`
calls the program's `power` and Python's `pow` (on the host), whatever the program defines; a
builtin the host does not evaluate (`zip`, `reversed`, ...) leaves the test to the judge, where
builtins are Python's own. Test code outside the whitelist (loops, lambdas, attribute calls on
results, classes) is not converted: `convert` returns None and the test runs in the harness's judge (`harness_judge`),
a process holding none of the program's code, which calls the program by proxy and sees only
plain data. Conversion is the fast path (no judge process, no round trip per call); the judge
is the general one. Neither runs test code in the program's interpreter, where a program could
forge the verdict (frames, gc, patched builtins, objects whose `__eq__` always says True).

Semantics are Python's: the checks compare exact plain values with Python's operators. All the
program's calls run, in the order they appear, before any check (no short-circuit between calls).

`evaluate` is bounded in time by the size of the values, whatever the program returned; where
Python itself would take quadratic or unbounded time it refuses instead, and why:
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
import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.code import values

MAX_BUILT = 10_000_000  # elements a sequence `*` or a `range` in test code may build
MAX_INT_BITS = 1 << 18  # bits an int `*` or `**` may build (returned ints have at most about 14,000)
# Helper functions test code may call (on the host), and type names it may name (for isinstance).
_BUILTINS: dict[str, Any] = {
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


_BUILTINS.update(range=_range, sum=_sum, round=_round, pow=_pow)
_BUILTINS.update({f.__name__: f for f in (ord, chr, divmod, hex, bin, oct)})  # linear in their input's size
# Every name Python's builtins define is Python's, never the program's: in `assert power(2, 10) ==
# pow(2, 10)` the program must not supply `pow`. Those outside _BUILTINS leave the test unconverted,
# for the judge, where they are Python's own (harness_judge proxies no builtin's name).
_PYTHON_NAMES = frozenset(vars(builtins))
_TYPES = {
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
_MATH = {
    name: getattr(math, name)
    for name in ("isclose", "sqrt", "fabs", "floor", "ceil", "isnan", "isinf", "isfinite", "pi", "e", "inf")
}
_KEYWORDS = {"isclose": {"rel_tol", "abs_tol"}, "sorted": {"reverse"}, "round": {"ndigits"}}
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS = {
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
_UNARY = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}
CALL_PREFIX = "__call"


class Unsupported(Exception):
    """The test code is outside the convertible subset (it then runs in-process)."""


@dataclass(frozen=True)
class ProgramCall:
    """One call of the program's function. The arguments are Python source of constant
    expressions (a tuple, a dict), evaluated in the sandbox before the program runs: a large
    argument such as `list(range(10**6))` is built there, not shipped."""

    fn: str
    args: str
    kwargs: str


@dataclass(frozen=True, eq=False)
class JudgedAssert:
    """A converted test: the calls the sandbox makes, and the checks the host evaluates."""

    calls: tuple[ProgramCall, ...]
    body: tuple[ast.stmt, ...]  # the test, program calls replaced by names __call0, __call1, ...


@functools.lru_cache(maxsize=4096)
def convert(code: str) -> JudgedAssert | None:
    """The judged form of assert-style test code, or None when it must run in-process."""
    try:
        statements = _inline_checks(ast.parse(code).body)
        converter = _Converter()
        body = tuple(converter.statement(s, text) for s, text in statements)
    except (SyntaxError, Unsupported, RecursionError):
        return None
    if not converter.calls:
        return None  # nothing of the program's is called: not a test we understand
    return JudgedAssert(tuple(converter.calls), tuple(s for s in body if s is not None))


def evaluate(judged: JudgedAssert, results: list[Any]) -> None:
    """Run the checks over the program's results: returns when they hold, raises AssertionError
    when one fails, and another exception (TypeError, IndexError, ...) as Python would."""
    if len(results) != len(judged.calls):
        raise ValueError(f"{len(results)} results for {len(judged.calls)} calls")
    env = {f"{CALL_PREFIX}{i}": v for i, v in enumerate(results)}
    for statement in judged.body:
        try:
            if isinstance(statement, ast.Assert):
                holds = bool(_eval(statement.test, env))
            else:
                _assign(statement.targets[0], _eval(statement.value, env), env)
                holds = True
        except Exception as exc:  # noqa: BLE001 - Python's own exception, with a message that prints
            raise _printable(exc) from None
        if not holds:
            raise AssertionError(f"line {statement.lineno}: {statement.msg.value}")


def expected_constant(judged: JudgedAssert) -> tuple[bool, Any]:
    """(True, the constant) when the converted test is exactly one `assert <call> == <constant>`
    (either side): the harness can then stop at a value that is surely wrong (`harness_expect`).
    (False, None) for any other test, or a constant that fails to evaluate."""
    if len(judged.calls) != 1 or len(judged.body) != 1 or not isinstance(judged.body[0], ast.Assert):
        return False, None
    test = judged.body[0].test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False, None
    sides = (test.left, test.comparators[0])
    for this, other in (sides, sides[::-1]):
        if isinstance(this, ast.Name) and this.id == f"{CALL_PREFIX}0":
            if any(isinstance(n, ast.Name) and n.id.startswith(CALL_PREFIX) for n in ast.walk(other)):
                return False, None
            try:
                return True, _eval(other, {})
            except Exception:  # noqa: BLE001 - no expectation: the test runs to its end
                return False, None
    return False, None


# ---- conversion ---------------------------------------------------------------------------------
def _inline_checks(statements: list[ast.stmt]) -> list[tuple[ast.stmt, str]]:
    """HumanEval shape: `def check(candidate): ...` called once as `check(f)` -> its body with
    `candidate` renamed `f`. Any other function definition is unsupported. Each statement comes
    with its text as written, for the verdict's detail."""
    defs = {s.name: s for s in statements if isinstance(s, ast.FunctionDef)}
    out: list[tuple[ast.stmt, str]] = []
    used = set()
    for s in statements:
        if isinstance(s, ast.FunctionDef):
            a = s.args
            if s.decorator_list or len(a.args) != 1 or a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
                raise Unsupported("a function definition other than check(candidate)")
            continue
        call = s.value if isinstance(s, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in defs:
            if call.func.id in used or call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Name):
                raise Unsupported("check(...) called other than once with a function name")
            used.add(call.func.id)
            definition = defs[call.func.id]
            rename = _Rename(definition.args.args[0].arg, call.args[0].id)
            out += [(rename.visit(b), text) for b in definition.body for text in [_text(b)]]
            continue
        out.append((s, _text(s)))
    if used != set(defs):
        raise Unsupported("a function defined and never called")
    return out


def _text(s: ast.stmt) -> str:
    return ("assert " + ast.unparse(s.test) if isinstance(s, ast.Assert) else ast.unparse(s))[:200]


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(self.new, node.ctx), node) if node.id == self.old else node


class _Converter:
    """Checks statements against the whitelist and lifts the program's calls out of them."""

    def __init__(self) -> None:
        self.calls: list[ProgramCall] = []
        self.assigned: set[str] = set()

    def statement(self, s: ast.stmt, text: str) -> ast.stmt | None:
        if isinstance(s, ast.Assert):  # msg: the original text, for the verdict (never evaluated)
            return ast.Assert(self.expr(s.test), ast.Constant(text), lineno=s.lineno, col_offset=0)
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            value = self.expr(s.value)
            names = _target_names(s.targets[0])
            self.assigned.update(names)
            return ast.Assign([s.targets[0]], value, lineno=s.lineno, col_offset=0)
        if isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)):
            return None  # docstrings and pass
        if isinstance(s, ast.Import) and [a.name for a in s.names] == ["math"] and s.names[0].asname is None:
            return None
        raise Unsupported(type(s).__name__)

    def expr(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Call) and self._is_program_call(node):
            return self._lift(node)
        if isinstance(node, ast.Name):
            if node.id in self.assigned or node.id in _TYPES:
                return node
            raise Unsupported(f"name {node.id}")  # e.g. the program's function passed as a value
        if isinstance(node, ast.Call):
            self._check_helper_call(node)
            return ast.Call(
                node.func,
                [self.expr(a) for a in node.args],
                [ast.keyword(k.arg, self.expr(k.value)) for k in node.keywords],
            )
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in _MATH:
                return node
            raise Unsupported("attribute access")
        if isinstance(node, ast.Constant):
            if type(node.value) in (int, float, str, bytes, bool, complex) or node.value is None:
                return node
            raise Unsupported("constant")
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return type(node)(
                [self.expr(e) for e in node.elts], *([ast.Load()] if not isinstance(node, ast.Set) else [])
            )
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise Unsupported("dict unpacking")
            return ast.Dict([self.expr(k) for k in node.keys], [self.expr(v) for v in node.values])
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return ast.BinOp(self.expr(node.left), node.op, self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return ast.UnaryOp(node.op, self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [self.expr(v) for v in node.values])
        if isinstance(node, ast.Compare) and all(type(op) in _CMPOPS for op in node.ops):
            return ast.Compare(self.expr(node.left), node.ops, [self.expr(c) for c in node.comparators])
        if isinstance(node, ast.IfExp):
            return ast.IfExp(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, ast.Subscript):
            return ast.Subscript(self.expr(node.value), self.expr(node.slice), ast.Load())
        if isinstance(node, ast.Slice):
            return ast.Slice(*(None if p is None else self.expr(p) for p in (node.lower, node.upper, node.step)))
        raise Unsupported(type(node).__name__)

    def _is_program_call(self, node: ast.Call) -> bool:
        f = node.func
        return (
            isinstance(f, ast.Name)
            and f.id not in _BUILTINS
            and f.id not in _PYTHON_NAMES
            and f.id not in _TYPES
            and f.id not in self.assigned
            and not f.id.startswith(CALL_PREFIX)
        )

    def _check_helper_call(self, node: ast.Call) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if isinstance(f, ast.Name) and f.id not in _BUILTINS:
            raise Unsupported(f"call of {f.id}")
        if name is None or any(isinstance(a, ast.Starred) for a in node.args):
            raise Unsupported("call")
        if isinstance(f, ast.Attribute) and not (
            isinstance(f.value, ast.Name) and f.value.id == "math" and callable(_MATH.get(f.attr))
        ):
            raise Unsupported("method call")
        if any(k.arg not in _KEYWORDS.get(name, ()) for k in node.keywords):
            raise Unsupported(f"keywords of {name}")

    def _lift(self, node: ast.Call) -> ast.Name:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Unsupported("starred arguments")
        constant = _Converter()  # arguments: constant expressions only (no names, no program calls)
        args = ast.Tuple([constant.expr(a) for a in node.args], ast.Load())
        kwargs = ast.Dict([ast.Constant(k.arg) for k in node.keywords], [constant.expr(k.value) for k in node.keywords])
        if constant.calls:
            raise Unsupported("a program call inside an argument")
        name = f"{CALL_PREFIX}{len(self.calls)}"
        self.calls.append(ProgramCall(node.func.id, ast.unparse(args), ast.unparse(kwargs)))
        return ast.Name(name, ast.Load())


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name) and not target.id.startswith(CALL_PREFIX):
        return [target.id]
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]
    raise Unsupported("assignment target")


# ---- evaluation (host side) ---------------------------------------------------------------------
def _assign(target: ast.expr, value: Any, env: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return
    items = list(value)
    if len(items) != len(target.elts):
        raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
    for name, item in zip(target.elts, items):
        env[name.id] = item


def _eval(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        return _TYPES.get(node.id) or _BUILTINS[node.id]
    if isinstance(node, ast.Attribute):
        return _MATH[node.attr]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_eval(e, env) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: _set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return _dict([(_eval(k, env), _eval(v, env)) for k, v in zip(node.keys, node.values)])
    if isinstance(node, ast.BinOp):
        return _binop(type(node.op), _eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env))
    if isinstance(node, ast.BoolOp):
        result = None
        for v in node.values:
            result = _eval(v, env)
            if (not result) if isinstance(node.op, ast.And) else result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, env)[_eval(node.slice, env)]
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else _eval(p, env) for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Call):
        fn = _eval(node.func, env)
        if isinstance(fn, type):  # set(...), frozenset(...), dict(...): checked first
            fn = _CHECKED.get(fn, fn)
        return fn(*(_eval(a, env) for a in node.args), **{k.arg: _eval(k.value, env) for k in node.keywords})
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
    return _BINOPS[op](a, b)


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


def _printable(exc: Exception) -> Exception:
    """`exc`, or a RuntimeError naming it when its message cannot be printed (a KeyError of an int
    beyond Python's 4,300-digit str limit): the verdict quotes the message."""
    try:
        str(exc)
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__} (its message cannot be printed)")
