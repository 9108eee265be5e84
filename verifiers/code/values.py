"""Plain data across the sandbox wall: how a program's return values (and the arguments it is
called with) travel as text. Standard library only: this file is also shipped into the sandbox.

Only values of these EXACT types cross: None, bool, int, float, str, bytes, complex, list, tuple,
dict, set, frozenset. A subclass (an `int` whose `__eq__` always says True), an instance of a user
class, or a container holding one is refused by `encode` in the sandbox; and whatever bytes arrive
on the host (a program can write anything to its result pipe) are read by `decode`, a strict
parser with size and depth limits that builds only those exact types. So the host never calls
code the program chose: its judge compares values it built itself.

The text is JSON: scalars as themselves (floats keep a decimal point or exponent, so 1 and 1.0
stay apart), lists as arrays, everything else tagged: {"t": [...]} tuple, {"d": [[k, v], ...]}
dict, {"s": [...]} set, {"fs": [...]} frozenset, {"b": "hex"} bytes, {"c": [re, im]} complex,
{"f": "nan" | "inf" | "-inf"} for floats JSON cannot spell.
"""
from __future__ import annotations

import json
import math

MAX_DEPTH = 64          # nesting of containers
MAX_ITEMS = 1_000_000   # scalars and containers in one value
MAX_TEXT = 4 << 20      # characters of encoded text the host will parse
_TAGS = {"t": tuple, "s": set, "fs": frozenset}


class NotPlainData(ValueError):
    """The value is not plain data (a foreign type), or exceeds the size or depth limits."""


def encode(value: object) -> str:
    """The text of `value`, or NotPlainData. Iterative: a deep value cannot exhaust the stack."""
    return json.dumps(_tree(value), separators=(",", ":"), allow_nan=False)


def _tree(value: object) -> object:
    count = 0

    def leaf(v: object, depth: int) -> object:
        nonlocal count
        count += 1
        if count > MAX_ITEMS:
            raise NotPlainData(f"more than {MAX_ITEMS} items")
        if depth > MAX_DEPTH:
            raise NotPlainData(f"nested deeper than {MAX_DEPTH}")
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            if v.bit_length() > 14_000:  # about 4,200 digits: the interpreters' str limit
                raise NotPlainData("an int of more than about 4,200 digits")
            return v
        if t is float:
            return v if math.isfinite(v) else {"f": repr(v)}
        if t is bytes:
            return {"b": v.hex()}
        if t is complex:
            return {"c": [leaf(v.real, depth + 1), leaf(v.imag, depth + 1)]}
        if t is list:
            return [leaf(x, depth + 1) for x in list(v)]
        if t is tuple:
            return {"t": [leaf(x, depth + 1) for x in v]}
        if t is set or t is frozenset:
            return {"s" if t is set else "fs": [leaf(x, depth + 1) for x in list(v)]}
        if t is dict:
            return {"d": [[leaf(k, depth + 1), leaf(x, depth + 1)] for k, x in list(v.items())]}
        raise NotPlainData(f"a value of type {_type_name(t)} is not plain data")

    # Recursion depth is bounded by MAX_DEPTH, far below the interpreter's limit.
    return leaf(value, 0)


def _type_name(t: type) -> str:
    try:
        name = type.__getattribute__(t, "__qualname__")
        return name if isinstance(name, str) and type(name) is str else "?"
    except Exception:  # noqa: BLE001 - a hostile metaclass
        return "?"


def decode(text: str) -> object:
    """The value `text` encodes, built from exact plain types only; NotPlainData otherwise."""
    if type(text) is not str or len(text) > MAX_TEXT:
        raise NotPlainData(f"encoded value over {MAX_TEXT} characters")
    try:
        raw = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise NotPlainData("nested too deep") from None
    except ValueError as exc:  # also: an int too long for the interpreter's str limit
        raise NotPlainData(f"not an encoded value: {str(exc)[:100]}") from None
    count = 0

    def build(node: object, depth: int) -> object:
        nonlocal count
        count += 1
        if count > MAX_ITEMS or depth > MAX_DEPTH:
            raise NotPlainData("too large or nested too deep")
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [build(x, depth + 1) for x in node]
        if not (isinstance(node, dict) and len(node) == 1):
            raise NotPlainData("malformed encoded value")
        (tag, body), = node.items()
        if tag in _TAGS and isinstance(body, list):
            items = [build(x, depth + 1) for x in body]
            try:
                return _TAGS[tag](items)
            except TypeError:  # an unhashable member of a set
                raise NotPlainData("a set with an unhashable member") from None
        if tag == "d" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
            try:
                return {build(k, depth + 1): build(v, depth + 1) for k, v in body}
            except TypeError:
                raise NotPlainData("a dict with an unhashable key") from None
        if tag == "f" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "b" and isinstance(body, str):
            try:
                return bytes.fromhex(body)
            except ValueError:
                raise NotPlainData("malformed bytes") from None
        if tag == "c" and isinstance(body, list) and len(body) == 2:
            re_, im = (build(x, depth + 1) for x in body)
            if type(re_) is float and type(im) is float:
                return complex(re_, im)
        raise NotPlainData("malformed encoded value")

    return build(raw, 0)


def _no_constant(name: str) -> object:
    raise ValueError(f"bare {name}")
