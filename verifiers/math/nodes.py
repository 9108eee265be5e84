"""The parsed forms of an answer. An answer is one of these nodes; equivalence compares them."""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.units import Unit


@dataclass(frozen=True)
class Expr:
    """A number or expression. Decimals are kept exact (`0.1` is 1/10) but flagged:
    `has_decimal` for any decimal literal inside, `literal` = (exponent of the last digit's place,
    significant digits) when the whole answer is one decimal literal, for rounding rules.
    `unit` is "percent" or "degree" when the answer carried `%` or a degree mark; `measure` is a
    unit of measure written after it (`5 \\text{ km}`, see `units`)."""

    value: sympy.Expr
    has_decimal: bool = False
    literal: tuple[int, int] | None = None
    unit: str | None = None
    measure: Unit | None = None


@dataclass(frozen=True)
class Relation:
    """`a = b`, `x < 3`, `1 < x <= 2`, `x \\in [1, 2]`: the parts and the operators between them."""

    ops: tuple[str, ...]
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Bracket:
    """A bracketed list of two or more items: a tuple `(1, 2, 3)`, an interval `(1, 2]`, a vector."""

    items: tuple[Node, ...]
    open: str
    close: str


@dataclass(frozen=True)
class SetOf:
    """An explicit set `\\{1, 2\\}`."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Listing:
    """Several answers without brackets: `1, 2`, `x = 1 or x = 2`; `joiners` holds the words
    or commas between them ("and" matters for inequalities: `x > 1 and x < 3`)."""

    items: tuple[Node, ...]
    joiners: tuple[str, ...] = ()


@dataclass(frozen=True)
class SetExpr:
    """A subset of the reals: unions of intervals and points, as `intervals.Pieces`.
    `literals` maps endpoint values written as one decimal literal to that literal (see `Expr`),
    so that an endpoint `2.667` is judged by the decimal rules like a number on its own."""

    value: tuple
    has_decimal: bool = False
    literals: tuple = ()  # ((value, literal), ...)


@dataclass(frozen=True)
class Matrix:
    rows: tuple[tuple[Expr, ...], ...]


@dataclass(frozen=True)
class Text:
    """A word answer (`Monday`, `no solution`, a multiple-choice letter), lower-cased."""

    text: str


@dataclass(frozen=True)
class BaseNumber:
    """`204_5`: digits in a base."""

    digits: str
    base: int

    def value(self) -> int | None:
        """The number the digits denote, or None if they are not digits of the base."""
        try:
            return int(self.digits, self.base) if 2 <= self.base <= 36 else None
        except ValueError:
            return None


Node = Expr | Relation | Bracket | SetOf | Listing | SetExpr | Matrix | Text | BaseNumber


def as_expr(node: Node) -> Expr:
    """The node as a formula value; ParseError for a list, set, matrix... used inside a formula."""
    if not isinstance(node, Expr):
        raise ParseError(f"{type(node).__name__} used inside a formula")
    return node


def has_decimal(node: Node) -> bool:
    """Whether any number in the node was written with a decimal point."""
    if isinstance(node, (Expr, SetExpr)):
        return node.has_decimal
    if isinstance(node, (Bracket, SetOf, Listing)):
        return any(has_decimal(x) for x in node.items)
    if isinstance(node, Relation):
        return any(has_decimal(x) for x in node.parts)
    if isinstance(node, Matrix):
        return any(c.has_decimal for r in node.rows for c in r)
    return False


def literals(node: Node) -> tuple:
    """((value, literal), ...) for every number in `node` written as one decimal literal."""
    if isinstance(node, Expr):
        return ((node.value, node.literal),) if node.literal is not None else ()
    if isinstance(node, SetExpr):
        return node.literals
    if isinstance(node, (Bracket, SetOf, Listing)):
        return tuple(x for item in node.items for x in literals(item))
    if isinstance(node, Relation):
        return tuple(x for part in node.parts for x in literals(part))
    return ()
