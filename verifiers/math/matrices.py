"""Matrix arithmetic inside an answer: `A + B`, `A - B`, `2A`, `A/2`, `AB`, `-A`, where A and B
are written out (`\\begin{pmatrix}...\\end{pmatrix}`). Cells are combined with the guarded
operations of `build`; shapes must fit, and the work is capped like the matrices themselves."""

from __future__ import annotations

from rlvr.verifiers.math import build
from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.nodes import Expr, Matrix, Node, as_expr

MAX_PRODUCT_WORK = 8_000  # multiplications in one matrix product (20 x 20 times 20 x 20)


def _shape(m: Matrix) -> tuple[int, int]:
    return len(m.rows), len(m.rows[0])


def _map(m: Matrix, f) -> Matrix:
    return Matrix(tuple(tuple(f(c) for c in row) for row in m.rows))


def neg(m: Node) -> Node:
    return _map(m, build.neg) if isinstance(m, Matrix) else build.neg(as_expr(m))


def add(a: Node, b: Node) -> Matrix:
    if not (isinstance(a, Matrix) and isinstance(b, Matrix)):
        raise ParseError("a matrix plus a scalar")
    if _shape(a) != _shape(b):
        raise ParseError("matrices of different shapes added")
    return Matrix(tuple(tuple(build.add(x, y) for x, y in zip(ra, rb)) for ra, rb in zip(a.rows, b.rows)))


def mul(a: Node, b: Node) -> Node:
    """A scalar times a matrix (either side), or a matrix product."""
    if not isinstance(a, Matrix):
        k = as_expr(a)
        return _map(b, lambda c: build.mul(k, c))
    if not isinstance(b, Matrix):
        k = as_expr(b)
        return _map(a, lambda c: build.mul(c, k))
    (n, m), (m2, p) = _shape(a), _shape(b)
    if m != m2:
        raise ParseError("matrix shapes do not fit for a product")
    if n * m * p > MAX_PRODUCT_WORK:
        raise ParseError("matrix product too large")
    rows = []
    for i in range(n):
        row = []
        for j in range(p):
            cell: Expr = build.mul(a.rows[i][0], b.rows[0][j])
            for k in range(1, m):
                cell = build.add(cell, build.mul(a.rows[i][k], b.rows[k][j]))
            row.append(cell)
        rows.append(tuple(row))
    return Matrix(tuple(rows))


def div(a: Node, b: Node) -> Matrix:
    """A matrix divided by a scalar."""
    if not isinstance(a, Matrix) or isinstance(b, Matrix):
        raise ParseError("division by a matrix")
    k = as_expr(b)
    return _map(a, lambda c: build.div(c, k))
