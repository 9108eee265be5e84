"""The recursive-descent grammar of answers: lists, relations, set operations, arithmetic.

It builds SymPy objects directly through the guarded operations of `build` (no `eval`, no
`sympy.parsing`), so parsing is fast and hostile input is refused, not evaluated. Nesting is
capped (`MAX_DEPTH`) so Python's recursion limit is never reached.

answer   := item ((',' | ';' | 'and' | 'or') item)*        words around items are units/fillers
item     := setexpr (relop setexpr)*
setexpr  := sum (('\\cup' | '\\cap' | '\\setminus') sum)*
sum      := term (('+' | '-' | '\\pm' | '\\mp') term)*
term     := signed (('*' | '/') signed | implicit-product)*       also of matrices: 2A, A/2, AB
signed   := ('-' | '+')* power ;  power := postfix ('^' signed)? ;  postfix := primary ('!' | '%' | degree)*
"""

from __future__ import annotations

import sympy

from rlvr.verifiers.math import build, intervals, matrices, units
from rlvr.verifiers.math.build import PM
from rlvr.verifiers.math.canon import as_set
from rlvr.verifiers.math.lexer import ParseError, Token
from rlvr.verifiers.math.nodes import Expr, Listing, Matrix, Node, Relation, SetExpr, as_expr, has_decimal, literals
from rlvr.verifiers.math.primary import Primaries
from rlvr.verifiers.math.words import APPROXIMATE, FILLERS, MAX_COUNTED_WORDS, MULTIPLIERS, OPERATIVE

MAX_DEPTH = 40
_EOF = Token("eof", "")
_NO_IMPLICIT = {
    "in",
    "cup",
    "cap",
    "setminus",
    "rangle",
    "rfloor",
    "rceil",
    "ldots",
    "dots",
    "cdots",
    "over",
    "choose",
    "to",
}
_DEGREE_WORDS = {"degree", "degrees", "deg"}
_RADIAN_WORDS = {"radian", "radians", "rad", "rads"}
_GON_WORDS = {"gon", "gons", "grad", "grads", "gradian", "gradians"}  # a right angle is 100 gon
_PERCENT_WORDS = {"percent", "pct"}
_ANGLE_WORDS = _DEGREE_WORDS | _RADIAN_WORDS | _GON_WORDS
_UNIT_GRAMMAR = {"square", "sq", "cubic", "cu", "per"}


def _number_like(node: Node) -> bool:
    """What a counted noun may follow: a number (`12 apples`) or an assignment of one (`x = 12 apples`)."""
    if isinstance(node, Relation):
        node = node.parts[-1]
    return isinstance(node, Expr) and not node.value.free_symbols


class Parser(Primaries):
    """The grammar of lists, relations and arithmetic; atoms come from `Primaries`."""

    def __init__(self, tokens: list[Token], strict: bool = False):
        self.tokens = tokens
        self.i = 0
        self.depth = 0
        self.in_abs = 0
        # strict: a model's answer, whose every word must be in a closed class of `words` (a gold's
        # words are trusted and skipped as before)
        self.strict = strict

    # -- token helpers
    def peek(self, k: int = 0) -> Token:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else _EOF

    def take(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def at(self, kind: str, *texts: str) -> bool:
        tok = self.peek()
        return tok.kind == kind and (not texts or tok.text in texts)

    def expect(self, kind: str, text: str) -> None:
        if not self.at(kind, text):
            raise ParseError(f"expected {text!r}, got {self.peek().text!r}")
        self.i += 1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("answer nested too deeply")

    # -- lists of items
    def answer(self) -> Node:
        joiners: list[str] = []
        items = self.items(closers=(), joiners=joiners)
        if self.peek().kind != "eof":
            raise ParseError(f"unexpected {self.peek().text!r}")
        if not items:
            raise ParseError("no answer")
        return items[0] if len(items) == 1 else Listing(tuple(items), tuple(joiners))

    def items(self, closers: tuple[str, ...], joiners: list[str] | None = None) -> list[Node]:
        out: list[Node] = []
        joiners = [] if joiners is None else joiners
        while True:
            self.skip_words()
            tok = self.peek()
            if (
                tok.kind == "eof"
                or tok.kind == "op"
                and tok.text in closers
                or tok.kind in ("end", "cmd")
                and tok.text in closers
            ):
                return out
            out.append(self.units(self.item()))
            if self.at("op", ",", ";") or self.at("word", "and", "or"):
                joiners.append(self.take().text)
                if self.at("word", "and", "or"):  # ", and" / ", or"
                    joiners[-1] = self.take().text
                continue
            return out

    def skip_words(self) -> None:
        """Words before an item: fillers (`\\text{the answer is } 5`) and approximation words; in
        a strict answer any other word (`\\text{half of } 10`, `probably 8`) is refused."""
        while self.at("word") and self.peek().text not in ("and", "or"):
            word = self.take().text
            if self.strict and word not in FILLERS and word not in APPROXIMATE:
                raise ParseError(f"the word {word!r} is no unit, multiplier or filler")

    def units(self, node: Node) -> Node:
        """Words after an answer: degree, radian and percent words mark the number; units of measure
        (`cm^2`, `km per hour`, see `units.read`) are kept as its `measure`; a multiplier scales it
        (`5 thousand`). Other words: in a strict answer only fillers and a counted noun (`12
        apples`: at most two words, none of them `words.OPERATIVE`); in a gold they are dropped."""
        unit = None
        words: list[tuple[str, int]] = []
        unreadable = False
        scale = 1
        counted = 0
        while self.at("word") and self.peek().text not in ("and", "or"):
            word = self.take().text
            if word in _DEGREE_WORDS or word in _GON_WORDS:
                unit = "degree"
                if word in _GON_WORDS:  # a gon is 9/10 of a degree
                    scale *= sympy.Rational(9, 10)
            elif word in _RADIAN_WORDS:
                unit = "radian"
            elif word in _PERCENT_WORDS:
                unit = "percent"
            elif word in MULTIPLIERS and not counted:
                scale *= MULTIPLIERS[word]
                continue
            elif self.strict and not (word in units.TABLE or word in _UNIT_GRAMMAR or word in FILLERS):
                counted += 1
                if counted > MAX_COUNTED_WORDS or word in OPERATIVE or len(word) < 3 or not _number_like(node):
                    raise ParseError(f"the word {word!r} is no unit, multiplier or filler")
                continue
            power: int | None = 1
            if self.at("op", "^"):  # cm^2, cm^{3}
                self.take()
                exponent = self.group() if self.at("op", "{") else self.primary() if self.at("num") else None
                value = exponent.value if isinstance(exponent, Expr) else None
                small = value is not None and value.is_Integer and abs(value) <= units.MAX_POWER
                power = int(value) if small else None
            unreadable = unreadable or power is None
            words.append((word, 1 if power is None else power))
        if scale != 1:
            if not (isinstance(node, Expr) and node.unit is None and not node.value.free_symbols):
                raise ParseError("a multiplier after something that is not a number")
            node = Expr(build.plain(node) * scale, node.has_decimal)
        # a unit under an exponent that is not a small integer (cm^{999}) is a unit no gold has
        measure = units.read(words) if unit is None else None
        if measure is not None and unreadable:
            measure = units.UNREADABLE
        if unit is None and measure is None:
            return node
        if isinstance(node, Expr) and node.unit is None and node.measure is None:
            return Expr(node.value, node.has_decimal, node.literal, unit, measure)
        if isinstance(node, Relation) and isinstance(node.parts[-1], Expr):
            last = node.parts[-1]
            marked = Expr(last.value, last.has_decimal, last.literal, unit or last.unit, measure or last.measure)
            return Relation(node.ops, node.parts[:-1] + (marked,))
        return node

    def item(self) -> Node:
        if self.at("rel", "=", "~"):  # "= 5", "\approx 3.14": a value stated after a relation
            self.take()
        parts, ops = [self.setexpr()], []
        while self.at("rel") or self.at("cmd", "in") or self.at("word", "in"):
            tok = self.take()
            ops.append("in" if tok.text == "in" else tok.text)
            parts.append(self.setexpr())
        return parts[0] if not ops else Relation(tuple(ops), tuple(parts))

    def setexpr(self) -> Node:
        node = self.sum()
        while self.at("cmd", "cup", "cap", "setminus"):
            op = self.take().text
            right = self.sum()
            left_set, right_set = as_set(node), as_set(right)
            value = {"cup": intervals.union, "cap": intervals.intersect, "setminus": intervals.difference}[op](
                left_set, right_set
            )
            node = SetExpr(value, has_decimal(node) or has_decimal(right), literals(node) + literals(right))
        return node

    # -- arithmetic
    def sum(self) -> Node:
        node = self.term()
        while self.at("op", "+", "-", "pm", "mp"):
            op = self.take().text
            right = self.term()
            if isinstance(node, Matrix) or isinstance(right, Matrix):  # A + B, A - B
                if op not in ("+", "-"):
                    raise ParseError("\\pm with a matrix")
                node = matrices.add(node, matrices.neg(right) if op == "-" else right)
                continue
            right = as_expr(right)
            if op == "-":
                right = build.neg(right)
            elif op in ("pm", "mp"):
                right = Expr((PM if op == "pm" else -PM) * build.plain(right), right.has_decimal)
            node = build.add(as_expr(node), right)
        return node

    def term(self) -> Node:
        node = self.signed()
        while True:
            if self.at("op", "*", "/"):
                op = self.take().text
                node = self.product(node, self.signed(), op)
            elif self.starts_factor():
                node = self.product(node, self.power(), "*")
            else:
                return node

    @staticmethod
    def product(left: Node, right: Node, op: str) -> Node:
        if isinstance(left, Matrix) or isinstance(right, Matrix):  # 2A, A/2, AB
            return matrices.mul(left, right) if op == "*" else matrices.div(left, right)
        left, right = as_expr(left), as_expr(right)
        return build.mul(left, right) if op == "*" else build.div(left, right)

    def starts_factor(self) -> bool:
        tok = self.peek()
        if tok.kind in ("id", "begin"):
            return True
        if tok.kind == "cmd":
            return tok.text not in _NO_IMPLICIT
        return tok.kind == "op" and (tok.text in ("(", "{") or tok.text == "|" and not self.in_abs)

    def signed(self) -> Node:
        negate = False
        while self.at("op", "-", "+", "pm"):
            tok = self.take().text
            if tok == "pm":
                node = as_expr(self.power())
                return Expr(PM * build.plain(node), node.has_decimal)
            negate ^= tok == "-"
        start = self.i
        node = self.power()
        if self.i == start + 1 and self.tokens[start].kind == "num" and self.tokens[start].text.isdigit():
            node = self.mixed(as_expr(node))
        return matrices.neg(node) if negate else node

    def mixed(self, whole: Expr) -> Expr:
        """`3\\frac{1}{2}` and `3 1/2` are mixed numbers (3 + 1/2), not products."""
        start = self.i
        if self.at("cmd", "frac"):
            part = as_expr(self.primary())
        elif self.at("num") and self.peek(1) == Token("op", "/") and self.peek(2).kind == "num":
            part = build.div(build.number(self.take().text), build.number(self.tokens[self.i + 1].text))
            self.i += 2
        else:
            return whole
        v = part.value
        if v.is_Rational and 0 < v < 1 and not part.has_decimal:
            return as_expr(self.postfix_ops(build.add(whole, part)))
        self.i = start  # not a proper fraction: an ordinary product, parsed again by term()
        return whole

    def power(self) -> Node:
        node = self.postfix()
        if self.at("op", "^"):
            self.take()
            self.enter()
            exponent = self.group() if self.at("op", "{") else self.signed()
            self.depth -= 1
            node = build.power(as_expr(node), as_expr(exponent))
            node = self.postfix_ops(node)
        return node

    def postfix(self) -> Node:
        return self.postfix_ops(self.primary())

    def postfix_ops(self, node: Node) -> Node:
        while True:
            if self.at("op", "!"):
                self.take()
                node = build.factorial(as_expr(node))
            elif self.at("pct") or self.at("deg"):
                unit = "percent" if self.take().kind == "pct" else "degree"
                e = as_expr(node)
                node = Expr(e.value, e.has_decimal, e.literal, unit)
            elif self.at("op", "'"):
                self.take()
            else:
                return node
