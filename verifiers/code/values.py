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

Decoding is linear in the text's size, also on hostile text:
- No more than MAX_SAME_HASH members of one set or frozenset, or keys of one dict, may share a
  hash value (`HashFlood`, a NotPlainData). Python builds a set whose members all hash alike in
  quadratic time (every insert compares with every earlier member): 50,000 multiples of 2**61 - 1
  took over a minute. Numbers hash by value, so ints, floats, complexes, and the tuples and
  frozensets built from them can be made to collide at will; honest data shares a hash rarely
  and a few times at most (-1 and -2; 0.5 and 2**60). The hashes are counted before anything is
  built. `check_hash_spread` is the same check for sets and dicts a judge builds on the host
  from returned values (`set(values)` in test code), where equal members count once.
- An encoded set or dict never repeats a member or key (`encode` writes a real set or dict), so
  a repeat is refused, not merged.
`json_form` is a value as JSON sees it (the form call tests compare, `cases.py`): tuples become
lists and dict keys strings; keys that would collapse into one (`{1: 'a', '1': 'b'}`, or
`{True: 1, 'true': 2}`) are refused (`KeysCollide`) rather than silently merged.
"""

from __future__ import annotations

import collections
import json
import math

MAX_DEPTH = 64  # nesting of containers
MAX_ITEMS = 1_000_000  # scalars and containers in one value
MAX_TEXT = 4 << 20  # characters of encoded text the host will parse
MAX_SAME_HASH = 8  # members of one set (keys of one dict) that may share a hash value
_TAGS = {"t": tuple, "s": set, "fs": frozenset}


# Not an RlvrError: shipped into the sandbox (standard library only); the host catches it where it decodes.
class NotPlainData(ValueError):
    """The value is not plain data (a foreign type), or exceeds the size or depth limits."""


class HashFlood(NotPlainData):
    """More than MAX_SAME_HASH members of one set (keys of one dict) share a hash value."""


class KeysCollide(NotPlainData):
    """Two keys of one dict become the same key in JSON (`{1: 'a', '1': 'b'}`)."""


def encode(value: object) -> str:
    """The text of `value`, or NotPlainData. Iterative: a deep value cannot exhaust the stack."""
    return _ENCODER.encode(_tree(value))


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
        raw = _DECODER.decode(text)
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
        ((tag, body),) = node.items()
        if tag in _TAGS and isinstance(body, list):
            items = [build(x, depth + 1) for x in body]
            if tag == "t":
                return tuple(items)
            _check_members(items, "a set with an unhashable member")
            built = _TAGS[tag](items)
            if len(built) != len(items):
                raise NotPlainData("a set with a repeated member")
            return built
        if tag == "d" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
            pairs = [(build(k, depth + 1), build(v, depth + 1)) for k, v in body]
            _check_members([k for k, _ in pairs], "a dict with an unhashable key")
            built = dict(pairs)
            if len(built) != len(pairs):
                raise NotPlainData("a dict with a repeated key")
            return built
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


# Made once: json.dumps and json.loads build a new encoder or decoder on every call given options
# (a third of a proxied call's codec time in the judge, harness_judge.py).
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _check_members(members: list, unhashable: str) -> None:
    try:
        check_hash_spread(members)
    except TypeError:  # a list in a set
        raise NotPlainData(unhashable) from None


def check_hash_spread(members: list, distinct: bool = False) -> None:
    """HashFlood when more than MAX_SAME_HASH members share a hash value, in time linear in their
    size (TypeError for an unhashable member, as Python's set() would). `distinct`: equal members
    count once (Python's `set(values)` of a list with repeats); otherwise each member counts.
    Hash values themselves are ints below 2**64, so at most 9 of them share a hash: counting them
    in a dict is linear. Up to MAX_SAME_HASH members need no count (each is still hashed)."""
    if len(members) <= MAX_SAME_HASH:
        for member in members:
            hash(member)
        return
    counts = collections.Counter(map(hash, members))
    heavy = {h for h, n in counts.items() if n > MAX_SAME_HASH}
    if heavy and distinct:  # repeats are legal here: count the distinct members of crowded hashes only
        buckets: dict[int, list] = {h: [] for h in heavy}
        for m in members:
            bucket = buckets.get(hash(m))
            if bucket is None or any(b is m or b == m for b in bucket):
                continue
            if len(bucket) == MAX_SAME_HASH:
                break
            bucket.append(m)
        else:
            return
    if heavy:
        raise HashFlood(f"more than {MAX_SAME_HASH} members of one set or dict share a hash value")


def json_form(value: object) -> object:
    """`value` after a JSON round trip (tuples become lists, dict keys strings); KeysCollide when
    two keys of one dict become one, TypeError or ValueError when it is not JSON data."""
    return json.loads(json.dumps(value), object_pairs_hook=_unique_keys)


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    built = dict(pairs)
    if len(built) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise KeysCollide(f"two keys of one dict are both {repeated[:50]!r} in JSON")
    return built
