"""Short programming tasks for the tiny model's warm start, in the shape of `rlvr/Code-v0`'s tasks.

They teach the format (a statement naming a function and its parameters -> one ```python block
defining it, or a stdin program) and a handful of one-line idioms, with made-up names and
constants. None is one of `rlvr/Code-v0`'s tasks: training on those would be training on the
evaluation set (that env's 35 tasks are its only tasks). Each template takes a seeded generator
and returns (statement, entry point or None for a stdin program, reference code).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

CodeTask = tuple[str, "str | None", str]

# Names are drawn from many words so that the model must copy them from the statement (a small
# set of names would be guessed from memory instead).
_WORDS = tuple(
    """
alpha apple atom badge band base beam bell bird block board bolt bond book box brick bridge brush
cable cake camp card cart cell chain chair chart chip city clock cloud coin cone cord core crane
crop cube cup curve dart deck desk dial disk dock door dot draft drum dust edge egg engine face farm
fern field file flag flame fleet floor flow foam fork frame frost fruit gate gear gem glass glove
goal grain graph grid group guard hand harbor hill hook horn house ice ink iron item jar jet key
kite knot lake lamp lane leaf lens letter lever light line link lion list lock loop map mark mask
meal mesh metal mill mint mode moon motor mount nail needle nest net node note oak ocean orbit
oven pack page paint pair panel paper path peak pearl pen pipe plan plane plate plot pole pond port
post pump quest rail rain range ray reef ring river road rock roof room root rope rose route row
rule sail salt sand scale scene seed shape shelf shell ship shore sign silk sky slope snow sock
soil spark spoon square stack stage star stem step stone storm stream string sun table tank tape
task tent tide tile token tool tower town track trade trail train tree tube turn valve vase vent
wall wave wheel wind wing wire wood word yard zone""".split()
)
_VERBS = (
    "get",
    "compute",
    "find",
    "calc",
    "make",
    "to",
    "count",
    "total",
    "pick",
    "check",
    "sum",
    "scale",
    "shift",
    "clean",
    "join",
    "split",
    "rank",
    "parse",
    "build",
    "fix",
)
_PARAMS = (
    "x",
    "n",
    "k",
    "v",
    "t",
    "a",
    "m",
    "d",
    "c",
    "p",
    "y",
    "z",
    "w",
    "b",
    "r",
    "s",
    "num",
    "val",
    "size",
    "amount",
    "count",
    "limit",
    "base",
)
_SEQS = ("nums", "xs", "values", "items", "data", "scores", "numbers", "vals", "arr", "seq", "lst", "ints")
_STRS = ("s", "text", "word", "line", "name", "phrase", "msg", "label", "sentence", "title", "code")


def _made_up(rng: np.random.Generator) -> str:
    """A made-up word: half the time pronounceable, otherwise any letters, so that letters get copied."""
    if rng.random() < 0.5:  # pronounceable
        return "".join(
            str(rng.choice(list("bcdfghklmnprstvwz" if i % 2 == 0 else "aeiouy")))
            for i in range(int(rng.integers(3, 10)))
        )
    return "".join(str(rng.choice(list("abcdefghijklmnopqrstuvwxyz"))) for _ in range(int(rng.integers(2, 9))))


def _word(rng: np.random.Generator) -> str:
    """A word of the list, or (two times in five) a made-up one, so that any letters get copied."""
    if rng.random() < 0.6:
        return str(rng.choice(_WORDS))
    return _made_up(rng)


def _name(rng: np.random.Generator) -> str:
    """One to three parts, each a verb, a word or made-up letters, in any order: a name whose first
    part is predictable teaches the model to guess it instead of copying it from the statement."""
    parts = [str(rng.choice(_VERBS)) if rng.random() < 0.25 else _word(rng) for _ in range(int(rng.integers(1, 4)))]
    return "_".join(parts)


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return str(rng.choice(options))


def _t_formula(rng: np.random.Generator) -> CodeTask:
    a, b, c = int(rng.integers(2, 10)), int(rng.integers(2, 10)), int(rng.integers(1, 100))
    src, dst = _word(rng), _word(rng)
    if src[0] == dst[0]:
        dst = "x" + dst
    name, p, s, d = f"{src}_to_{dst}", src[0], src[0].upper(), dst[0].upper()
    statement = (
        f"Write a function `{name}({p}: float) -> float` that converts {src} to {dst} ({d} = {s} * {a}/{b} + {c})."
    )
    return statement, name, f"def {name}({p}):\n    return {p} * {a} / {b} + {c}\n"


def _t_linear(rng: np.random.Generator) -> CodeTask:
    name, p = _name(rng), _pick(rng, _PARAMS)
    a, b = int(rng.integers(2, 20)), int(rng.integers(1, 50))
    op, word = (("+", "plus"), ("-", "minus"))[int(rng.integers(0, 2))]
    statement = f"Write a function `{name}({p}: int) -> int` that returns {p} times {a} {word} {b}."
    return statement, name, f"def {name}({p}):\n    return {p} * {a} {op} {b}\n"


def _t_reduce(rng: np.random.Generator) -> CodeTask:
    name, p = _name(rng), _pick(rng, _SEQS)
    what, body = [
        ("sum", f"sum({p})"),
        ("largest value", f"max({p})"),
        ("smallest value", f"min({p})"),
        ("number of elements", f"len({p})"),
        ("sorted copy", f"sorted({p})"),
        ("elements in reverse order", f"{p}[::-1]"),
        ("distinct values, sorted", f"sorted(set({p}))"),
    ][int(rng.integers(0, 7))]
    statement = f"Write a function `{name}({p}: list[int])` that returns the {what} of `{p}`."
    return statement, name, f"def {name}({p}):\n    return {body}\n"


def _t_count(rng: np.random.Generator) -> CodeTask:
    name, p = _name(rng), _pick(rng, _STRS)
    what, cond = [
        ("digits", "c.isdigit()"),
        ("upper-case letters", "c.isupper()"),
        ("spaces", 'c == " "'),
        ("letters", "c.isalpha()"),
        ('characters among "xyz"', 'c in "xyz"'),
    ][int(rng.integers(0, 5))]
    statement = f"Write a function `{name}({p}: str) -> int` that returns how many {what} `{p}` contains."
    return statement, name, f"def {name}({p}):\n    return sum(1 for c in {p} if {cond})\n"


def _t_string(rng: np.random.Generator) -> CodeTask:
    name, p = _name(rng), _pick(rng, _STRS)
    what, body = [
        ("in upper case", f"{p}.upper()"),
        ("in lower case", f"{p}.lower()"),
        ("reversed", f"{p}[::-1]"),
        ("without leading and trailing spaces", f"{p}.strip()"),
        ("with its words joined by dashes", f'"-".join({p}.split())'),
    ][int(rng.integers(0, 5))]
    statement = f"Write a function `{name}({p}: str) -> str` that returns `{p}` {what}."
    return statement, name, f"def {name}({p}):\n    return {body}\n"


def _t_predicate(rng: np.random.Generator) -> CodeTask:
    name, p = f"is_{_name(rng)}", _pick(rng, _PARAMS)
    k = int(rng.integers(2, 13))
    what, body = [
        (f"divisible by {k}", f"{p} % {k} == 0"),
        (f"greater than {k}", f"{p} > {k}"),
        ("even", f"{p} % 2 == 0"),
        ("odd", f"{p} % 2 == 1"),
        ("negative", f"{p} < 0"),
    ][int(rng.integers(0, 5))]
    statement = f"Write a function `{name}({p}: int) -> bool` that tells whether `{p}` is {what}."
    return statement, name, f"def {name}({p}):\n    return {body}\n"


def _t_loop(rng: np.random.Generator) -> CodeTask:
    name, p = _name(rng), _pick(rng, _PARAMS)
    what, op, start = [("sum", "+", 0), ("product", "*", 1)][int(rng.integers(0, 2))]
    statement = f"Write a function `{name}({p}: int) -> int` returning the {what} of the integers from 1 to {p}."
    code = (
        f"def {name}({p}):\n    result = {start}\n"
        f"    for i in range(1, {p} + 1):\n        result {op}= i\n    return result\n"
    )
    return statement, name, code


# Ways to say "the integers on standard input" and "print their X": the idiom, not one sentence.
_STDIN_INTS = (
    "The integers given on standard input (separated by whitespace)",
    "Standard input contains whole numbers, separated by spaces or newlines",
    "Read every integer from standard input (any number per line)",
    "Given integers on standard input, spread over one or more lines",
)
_STDIN_VERBS = ("output", "print", "write")


def _t_stdin(rng: np.random.Generator) -> CodeTask:
    what, body = [
        ("sum", "sum(nums)"),
        ("largest", "max(nums)"),
        ("smallest", "min(nums)"),
        ("count", "len(nums)"),
        ("total", "sum(nums)"),
        ("maximum", "max(nums)"),
        ("minimum", "min(nums)"),
    ][int(rng.integers(0, 7))]
    statement = f"{_pick(rng, _STDIN_INTS)}: {_pick(rng, _STDIN_VERBS)} their {what}."
    return statement, None, f"import sys\nnums = [int(tok) for tok in sys.stdin.read().split()]\nprint({body})\n"


def _t_stdin_line(rng: np.random.Generator) -> CodeTask:
    k = int(rng.integers(2, 10))
    what, expr = [
        (f"`YES` if it is divisible by {k}, otherwise `NO`", f'"YES" if n % {k} == 0 else "NO"'),
        (f"it times {k}", f"n * {k}"),
        ("its square", "n * n"),
    ][int(rng.integers(0, 3))]
    statement = f"Read an integer n from standard input and print {what}."
    return statement, None, f"n = int(input())\nprint({expr})\n"


TEMPLATES: tuple[Callable[[np.random.Generator], CodeTask], ...] = (
    _t_formula,
    _t_linear,
    _t_reduce,
    _t_count,
    _t_string,
    _t_predicate,
    _t_loop,
    _t_stdin,
    _t_stdin_line,
)


def code_task(seed: int) -> CodeTask:
    """The synthetic task of this seed."""
    rng = np.random.default_rng([seed, 11])
    return TEMPLATES[int(rng.integers(0, len(TEMPLATES)))](rng)
