"""The atoms of the answer grammar: numbers, symbols, brackets, sets, `\\frac`, `\\sqrt`,
functions, matrices. A mixin of `grammar.Parser`, which supplies the token helpers and the
expression rules these call back into (`items`, `sum`, `signed`, `power`, `postfix`)."""

from __future__ import annotations

import sympy

from rlvr.verifiers.math import build, intervals
from rlvr.verifiers.math.canon import canon
from rlvr.verifiers.math.lexer import ParseError, Token
from rlvr.verifiers.math.nodes import Bracket, Expr, Listing, Matrix, Node, Relation, SetExpr, SetOf, as_expr

MAX_MATRIX_CELLS = 400


def _variables(node: Node) -> set:
    """The free symbols of a relation or a list of relations."""
    if isinstance(node, Expr):
        return set(node.value.free_symbols)
    parts = node.parts if isinstance(node, Relation) else node.items if isinstance(node, Listing) else ()
    return set().union(*(_variables(p) for p in parts)) if parts else set()


MAX_DETERMINANT = 5


class Primaries:
    """Atoms of the grammar (mixed into `grammar.Parser`)."""

    def group(self) -> Node:
        """`{...}`: a LaTeX group (one item) or, with several items, a set written plainly."""
        self.expect("op", "{")
        self.enter()
        items = self.items(closers=("}",))
        if len(items) == 1 and self.at("cmd", "choose", "over"):  # {n \choose k}, {a \over b}
            op = self.take().text
            lower = as_expr(self.sum())
            items = [
                build.binomial(as_expr(items[0]), lower) if op == "choose" else build.div(as_expr(items[0]), lower)
            ]
        self.expect("op", "}")
        self.depth -= 1
        if len(items) == 1:
            return items[0]
        return SetOf(tuple(items))

    def arg(self) -> Expr:
        """One argument of \\frac, \\sqrt, \\binom: a group or a single token (`\\frac12`)."""
        if self.at("op", "{"):
            return as_expr(self.group())
        tok = self.peek()
        if tok.kind == "num" and len(tok.text) > 1 and tok.text.isdigit():
            self.tokens[self.i] = Token("num", tok.text[1:])
            return build.number(tok.text[0])
        return as_expr(self.postfix())

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "num":
            if self.at("op", "_") and self.peek(1).kind in ("num", "op"):
                raise ParseError("a number in a base inside an expression")
            return build.number(tok.text)
        if tok.kind == "id":
            return Expr(self.symbol(tok.text))
        if tok.kind == "cmd":
            return self.command(tok.text)
        if tok.kind == "begin":
            return self.matrix(tok.text)
        if tok.kind == "op":
            if tok.text in ("(", "["):
                return self.bracket(tok.text)
            if tok.text == "{":
                self.i -= 1
                return self.group()
            if tok.text == "\\{":
                builder = self.set_builder()
                if builder is not None:
                    return builder
                self.enter()
                items = self.items(closers=("\\}",))
                self.expect("op", "\\}")
                self.depth -= 1
                return SetOf(tuple(items))
            if tok.text == "|" and not self.in_abs:
                self.in_abs += 1
                self.enter()
                inner = as_expr(self.sum())
                self.expect("op", "|")
                self.in_abs -= 1
                self.depth -= 1
                return build.combine(sympy.Abs(build.plain(inner)), inner)
        raise ParseError(f"unexpected {tok.text!r}")

    def set_builder(self) -> SetExpr | None:
        """`\\{x \\mid 1 \\le x \\le 2\\}`, `\\{x \\in \\mathbb{R} : x > 3\\}` (after the `\\{`): the real
        numbers meeting a condition on one variable, as the set of `canon`. None if the braces do
        not open with `x |` or `x :` (then they are a listed set); ParseError for a condition that
        is not a union of intervals in that variable, or a domain other than the reals."""
        head = self.peek()
        k = self.i + 1
        if self.peek(1) == Token("cmd", "in") and self.peek(2) == Token("cmd", "reals"):
            k += 2
        sep = self.tokens[k] if k < len(self.tokens) else None
        if head.kind != "id" or sep is None or sep.kind != "op" or sep.text not in ("|", ":"):
            return None
        depth, end = 0, k + 1
        while end < len(self.tokens):
            t = self.tokens[end]
            if t.kind == "op" and t.text in ("\\{", "\\}"):
                if t.text == "\\}" and depth == 0:
                    break
                depth += 1 if t.text == "\\{" else -1
            end += 1
        else:
            raise ParseError("unclosed set")
        inner = type(self)(self.tokens[k + 1 : end])
        inner.depth = self.depth + 1
        condition = inner.answer()
        var = self.symbol(head.text) if head.text not in ("e", "i") else None
        if var is None or not isinstance(var, sympy.Symbol) or _variables(condition) != {var}:
            raise ParseError("set-builder condition is not on its variable")
        value = canon(condition)
        if not isinstance(value, SetExpr):
            raise ParseError("set-builder condition is not a union of intervals")
        self.i = end + 1
        return value

    def symbol(self, name: str) -> sympy.Basic:
        if self.at("op", "_"):
            self.take()
            sub = self.take()
            if sub.kind == "op" and sub.text == "{":
                parts = []
                while not self.at("op", "}"):
                    if self.peek().kind == "eof":
                        raise ParseError("unclosed subscript")
                    parts.append(self.take().text)
                self.take()
                sub = Token("id", "".join(parts))
            return sympy.Symbol(f"{name}_{sub.text}")
        if name == "e":
            return sympy.E
        if name == "i":
            return sympy.I
        return sympy.Symbol(name)

    def bracket(self, open_: str) -> Node:
        self.enter()
        items = self.items(closers=(")", "]"))
        close = self.take()
        if close.kind != "op" or close.text not in (")", "]"):
            raise ParseError(f"unclosed {open_!r}")
        self.depth -= 1
        if len(items) == 1 and {"(": ")", "[": "]"}[open_] == close.text:
            return items[0]
        if len(items) < 2:
            raise ParseError("mismatched brackets")
        return Bracket(tuple(items), open_, close.text)

    def command(self, name: str) -> Node:
        if name == "frac":
            num = self.arg()
            return build.div(num, self.arg())
        if name == "sqrt":
            index = None
            if self.at("op", "["):
                self.take()
                index = as_expr(self.sum())
                self.expect("op", "]")
            return build.root(self.arg(), index)
        if name == "binom":
            n = self.arg()
            return build.binomial(n, self.arg())
        if name in ("pi", "oo"):
            return Expr(sympy.pi if name == "pi" else sympy.oo)
        if name in ("i", "e"):
            return Expr(sympy.I if name == "i" else sympy.E)
        if name == "reals":
            return SetExpr(intervals.REALS)
        if name in ("emptyset", "varnothing"):
            return SetExpr(intervals.EMPTY)
        if name == "langle":
            self.enter()
            items = self.items(closers=("rangle",))
            self.expect("cmd", "rangle")
            self.depth -= 1
            return Bracket(tuple(items), "(", ")")
        if name in ("lfloor", "lceil"):
            self.enter()
            inner = as_expr(self.sum())
            self.expect("cmd", "rfloor" if name == "lfloor" else "rceil")
            self.depth -= 1
            return build.function("floor" if name == "lfloor" else "ceil", [inner])
        if name in build.FUNCTIONS or name in ("gcd", "lcm", "max", "min", "sqrt", "lg"):
            return self.call(name)
        raise ParseError(f"unexpected \\{name}")

    def call(self, name: str) -> Expr:
        base = exponent = None
        if self.at("op", "_"):
            self.take()
            base = as_expr(self.group() if self.at("op", "{") else self.primary())
        if self.at("op", "^"):
            self.take()
            exponent = as_expr(self.group() if self.at("op", "{") else self.signed())
        self.enter()
        if self.at("op", "(", "["):
            inner = self.bracket(self.take().text)
            args = [as_expr(x) for x in inner.items] if isinstance(inner, Bracket) else [as_expr(inner)]
        elif self.at("op", "{"):
            args = [as_expr(self.group())]
        else:  # \sin 2x: a product of factors, stopping at the next function
            arg = as_expr(self.signed())
            while self.starts_factor() and not (self.peek().kind == "cmd" and self.peek().text in build.FUNCTIONS):
                arg = build.mul(arg, as_expr(self.power()))
            args = [arg]
        self.depth -= 1
        return build.function(name, args, exponent, base)

    def matrix(self, env: str) -> Matrix:
        if env not in ("pmatrix", "bmatrix", "Bmatrix", "matrix", "smallmatrix", "array", "vmatrix"):
            raise ParseError(f"unsupported environment {env}")
        self.enter()
        rows, row = [], []
        while True:
            row.append(as_expr(self.sum()))
            if self.at("amp"):
                self.take()
            elif self.at("row"):
                self.take()
                rows.append(tuple(row))
                row = []
                if self.at("end"):
                    break
            elif self.at("end"):
                rows.append(tuple(row))
                break
            else:
                raise ParseError(f"unexpected {self.peek().text!r} in a matrix")
        self.take()
        self.depth -= 1
        if len({len(r) for r in rows}) != 1:
            raise ParseError("ragged matrix")
        if len(rows) * len(rows[0]) > MAX_MATRIX_CELLS or env == "vmatrix" and len(rows) > MAX_DETERMINANT:
            raise ParseError("matrix too large")
        if env == "vmatrix":
            return build.combine(
                sympy.Matrix([[c.value for c in r] for r in rows]).det(), *[c for r in rows for c in r]
            )
        return Matrix(tuple(rows))
