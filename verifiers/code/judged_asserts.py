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

How the host evaluates the checks, and within what bounds, is `judged_eval`'s.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.code.judged_eval import (
    BINOPS,
    BUILTINS,
    CMPOPS,
    KEYWORDS,
    MATH,
    PYTHON_NAMES,
    TYPES,
    UNARY,
    Unsupported,
    assign,
    eval_expr,
    printable,
)

CALL_PREFIX = "__call"


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
                holds = bool(eval_expr(statement.test, env))
            else:
                assign(statement.targets[0], eval_expr(statement.value, env), env)
                holds = True
        except Exception as exc:  # noqa: BLE001 - Python's own exception, with a message that prints
            raise printable(exc) from None
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
                return True, eval_expr(other, {})
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
            if node.id in self.assigned or node.id in TYPES:
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
            if isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in MATH:
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
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            return ast.BinOp(self.expr(node.left), node.op, self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
            return ast.UnaryOp(node.op, self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [self.expr(v) for v in node.values])
        if isinstance(node, ast.Compare) and all(type(op) in CMPOPS for op in node.ops):
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
            and f.id not in BUILTINS
            and f.id not in PYTHON_NAMES
            and f.id not in TYPES
            and f.id not in self.assigned
            and not f.id.startswith(CALL_PREFIX)
        )

    def _check_helper_call(self, node: ast.Call) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if isinstance(f, ast.Name) and f.id not in BUILTINS:
            raise Unsupported(f"call of {f.id}")
        if name is None or any(isinstance(a, ast.Starred) for a in node.args):
            raise Unsupported("call")
        if isinstance(f, ast.Attribute) and not (
            isinstance(f.value, ast.Name) and f.value.id == "math" and callable(MATH.get(f.attr))
        ):
            raise Unsupported("method call")
        if any(k.arg not in KEYWORDS.get(name, ()) for k in node.keywords):
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
