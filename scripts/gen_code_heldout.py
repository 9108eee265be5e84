"""Generate the held-out tests of `rlvr/Code-v0`'s built-in tasks (`heldout_tests` in
envs/data/code_tasks.jsonl): the tests `rlvr/CodeFeedback-v0` computes its reward on and never
quotes in any feedback.

    python scripts/gen_code_heldout.py           # rewrite the file (deterministic: same output each run)
    python scripts/gen_code_heldout.py --check   # only check the file against a fresh generation

For each task: a list of edge cases and seeded random inputs (below, one generator per task) is run
through the task's reference solution (our own code, on the host) to get the expected values.
Inputs the task already reveals (its statement's examples, its shown `tests`, the arguments of
its assert tests) are never used, nor are duplicates. Of the rest, `HELDOUT` are kept, first
those on which the shipped wrong solution disagrees with the reference (so the wrong solution
fails at least one held-out test: the checker's known-bad answer scores 0), then the others in
order. Function tasks get call tests (their values are compared on the host), stdin tasks get
stdin/stdout tests. Finally every task is checked in the real Docker sandbox: the reference
passes every test, the wrong solution fails at least one held-out test."""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import re
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "envs" / "data" / "code_tasks.jsonl"
HELDOUT = 6  # held-out tests per task
POOL = 40  # seeded random inputs tried per task, after the edge cases


def _words(rng: random.Random, n: int, alphabet: str = string.ascii_lowercase, most: int = 6) -> list[str]:
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, most))) for _ in range(n)]


def _spaced(rng: random.Random, words: list[str]) -> str:
    return "".join(w + " " * rng.randint(1, 3) for w in words).strip() if words else ""


def _grid(rng: random.Random, h: int, w: int, land: float) -> list[list[str]]:
    return [["#" if rng.random() < land else "." for _ in range(w)] for _ in range(h)]


def _maze(rng: random.Random) -> str:
    h, w = rng.randint(1, 6), rng.randint(2, 7)
    cells = [(r, c) for r in range(h) for c in range(w)]
    grid = _grid(rng, h, w, rng.choice((0.15, 0.3, 0.45)))
    (sr, sc), (er, ec) = rng.sample(cells, 2)
    grid[sr][sc], grid[er][ec] = "S", "E"
    return f"{h} {w}\n" + "".join("".join(row) + "\n" for row in grid)


def _islands(rng: random.Random) -> str:
    h, w = rng.randint(1, 7), rng.randint(1, 8)
    return f"{h} {w}\n" + "".join("".join(row) + "\n" for row in _grid(rng, h, w, rng.choice((0.3, 0.5, 0.7))))


def _roman(n: int) -> str:
    out = ""
    for value, sym in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while n >= value:
            out, n = out + sym, n - value
    return out


def _expression(rng: random.Random, depth: int = 0) -> str:
    if depth > 2 or rng.random() < 0.3:
        return str(rng.randint(0, 20))
    if rng.random() < 0.25:
        return f"({_expression(rng, depth + 1)})"
    op = rng.choice(["+", "-", "*", " + ", " - ", " * "])
    return f"{_expression(rng, depth + 1)}{op}{_expression(rng, depth + 1)}"


def _dag(rng: random.Random) -> list[Any]:
    n = rng.randint(1, 7)
    edges = [[u, v] for u in range(n) for v in range(n) if u != v and rng.random() < 0.2]
    if rng.random() < 0.6:  # mostly acyclic: keep edges that go one way in a random order
        order = rng.sample(range(n), n)
        edges = [[u, v] for u, v in edges if order.index(u) < order.index(v)]
    return [n, edges]


# Per task: (edge cases, one seeded random input). A call task's input is its argument list, a
# stdin task's input is the stdin text.
Gen = Callable[[random.Random], Any]
GENERATORS: dict[str, tuple[list[Any], Gen]] = {
    "reverse_words": (
        [["x"], ["   "], ["a\tb\nc"], [" lead trail "]],
        lambda r: [_spaced(r, _words(r, r.randint(2, 6)))],
    ),
    "is_palindrome": (
        [["Aa"], ["ab"], ["Was it a car or a cat I saw?"], ["0P"], ["!!"], ["Step on no pets"]],
        lambda r: [
            (lambda w: w + r.choice(["", "x", ",", " "]) + w[::-1].upper())(
                "".join(r.choice("abcAB12 ,") for _ in range(r.randint(1, 8)))
            )
        ],
    ),
    "fizzbuzz": (["3\n", "30\n", "2\n", "16\n"], lambda r: f"{r.randint(6, 60)}\n"),
    "count_vowels": (
        [["AbEcIdOfU"], ["xyz"], ["Queueing"], ["a"], ["BCD EFG"]],
        lambda r: ["".join(r.choice("aeiouAEIOUbcdXYZ !") for _ in range(r.randint(1, 15)))],
    ),
    "celsius_to_fahrenheit": ([[37], [-273.15], [1], [25.5], [-17.5]], lambda r: [r.randint(-100, 200)]),
    "sum_numbers": (
        ["0\n", "5\n", "  3\n\n 4 \n", "-7 7\n", "100 200 300 400\n1\n"],
        lambda r: "".join(
            " ".join(str(r.randint(-50, 99)) for _ in range(r.randint(1, 5))) + "\n" for _ in range(r.randint(1, 3))
        ),
    ),
    "second_largest": (
        [[[]], [[2, 1]], [[1, 2, 3, 3]], [[0, 0, 0]], [[-2, -2, -9]], [[10, 9, 10, 9]]],
        lambda r: [[r.randint(-9, 9) for _ in range(r.randint(2, 8))]],
    ),
    "digit_sum": ([[7], [10], [505], [999999999], [123456789]], lambda r: [r.randint(0, 10 ** r.randint(1, 12))]),
    "acronym": (
        [["hello"], ["a-b-c"], ["Python is fun"], ["Read-only memory"], ["x y"]],
        lambda r: ["".join(w + r.choice([" ", "-"]) for w in _words(r, r.randint(1, 5)))[:-1]],
    ),
    "leap_year": (
        ["2100\n", "2400\n", "1996\n", "1\n", "4\n", "1800\n", "2001\n"],
        lambda r: f"{r.randint(1, 3000)}\n",
    ),
    "factorial": ([[1], [2], [3], [12], [25]], lambda r: [r.randint(4, 30)]),
    "remove_duplicates": (
        [[[1, 1, 1]], [["x"]], [[2, 1]], [[0, 1, 0, 2, 1, 3]], [["c", "b", "a", "c"]]],
        lambda r: [[r.randint(0, 5) for _ in range(r.randint(1, 10))]],
    ),
    "run_length_encode": (
        [["ab"], ["aaaa"], ["abba"], ["xxxxxxxxxxxxxxxxxxxxy"], ["  "]],
        lambda r: ["".join(r.choice("ab") * r.randint(1, 4) for _ in range(r.randint(1, 5)))],
    ),
    "caesar": (
        [["abc", 0], ["ABC", 27], ["Hello", -3], ["z", 1], ["Mixed 123!", 13], ["", 5]],
        lambda r: [
            "".join(r.choice(string.ascii_letters + " ,.") for _ in range(r.randint(1, 12))),
            r.randint(-60, 60),
        ],
    ),
    "top_words": (
        ["one\n", "a b c d e\n", "Zz zz ZZ yy\n", "x1y2x3\n", "!!!\n"],
        lambda r: _spaced(r, r.choices(["red", "blue", "green", "Red", "GREEN", "tan"], k=r.randint(2, 9))) + "\n",
    ),
    "is_anagram": (
        [
            ["a", "a"],
            ["ab", "ba"],
            ["aab", "aba "],
            ["Tom Marvolo Riddle", "I am Lord Voldemort"],
            ["abc", "abd"],
            ["", " "],
        ],
        lambda r: (lambda w: [w, "".join(r.sample(w, len(w))) + r.choice(["", "", "a", "b"])])(
            "".join(r.choice("aabbc") for _ in range(r.randint(1, 6)))
        ),
    ),
    "flatten": (
        [[[[1, 2], [3]]], [[[[["deep"]]]]], [[1, [2], [[3]], [[[4]]]]], [[[], [], []]], [["x", ["y", ["z"]]]]],
        lambda r: [
            [
                r.randint(0, 9) if r.random() < 0.5 else [r.randint(0, 9), [r.randint(0, 9)]]
                for _ in range(r.randint(1, 5))
            ]
        ],
    ),
    "primes_up_to": ([[2], [0], [3], [30], [97], [100]], lambda r: [r.randint(4, 200)]),
    "rotate_matrix": (
        ["2 2\n1 2\n3 4\n", "1 3\n1 2 3\n", "3 3\n1 2 3\n4 5 6\n7 8 9\n"],
        lambda r: (
            lambda h, w: (
                f"{h} {w}\n" + "".join(" ".join(str(r.randint(-9, 99)) for _ in range(w)) + "\n" for _ in range(h))
            )
        )(r.randint(1, 4), r.randint(1, 4)),
    ),
    "balanced_brackets": (
        [["()"], ["(]"], ["((("], ["{[]}()"], ["x)"], ["[{()}](){}"], ["(()"]],
        lambda r: ["".join(r.choice("()[]{}a") for _ in range(r.randint(1, 10)))],
    ),
    "roman_to_int": (
        [["I"], ["IV"], ["IX"], ["XC"], ["CD"], ["MMMCMXCIX"], ["LVIII"]],
        lambda r: [_roman(r.randint(1, 3999))],
    ),
    "merge_intervals": (
        [[[[1, 1]]], [[[1, 2], [3, 4]]], [[[3, 4], [1, 3]]], [[[0, 0], [0, 0]]], [[[1, 5], [2, 3], [6, 9], [9, 10]]]],
        lambda r: [[(lambda a: [a, a + r.randint(0, 4)])(r.randint(0, 15)) for _ in range(r.randint(1, 5))]],
    ),
    "to_binary": (
        ["0\n", "2\n", "1024\n", "7\n16\n", "1023\n3\n0\n"],
        lambda r: "".join(f"{r.randint(0, 5000)}\n" for _ in range(r.randint(1, 4))),
    ),
    "lcs_length": (
        [["", ""], ["abc", "def"], ["abc", "cba"], ["aaaa", "aa"], ["abcde", "ace"]],
        lambda r: [
            "".join(r.choice("abc") for _ in range(r.randint(0, 10))),
            "".join(r.choice("abc") for _ in range(r.randint(0, 10))),
        ],
    ),
    "coin_change": (
        [[[1], 0], [[2], 4], [[3, 5], 7], [[1, 7, 10], 14], [[2, 5], 3], [[9, 6, 5, 1], 11]],
        lambda r: [sorted(r.sample(range(1, 13), r.randint(1, 4))), r.randint(0, 40)],
    ),
    "grid_path": (["1 2\nES\n", "2 2\nS#\n#E\n", "1 5\nS...E\n", "3 3\nS.#\n#..\n#.E\n"], _maze),
    "edit_distance": (
        [["", ""], ["a", ""], ["abc", "yabd"], ["flaw", "lawn"], ["intention", "execution"]],
        lambda r: [
            "".join(r.choice("abc") for _ in range(r.randint(0, 8))),
            "".join(r.choice("abc") for _ in range(r.randint(0, 8))),
        ],
    ),
    "lis_length": (
        [[[5]], [[1, 2, 3]], [[3, 2, 1]], [[1, 3, 2, 4]], [[2, 2, 3, 3, 4]], [[0, 8, 4, 12, 2, 10, 6, 14]]],
        lambda r: [[r.randint(0, 20) for _ in range(r.randint(1, 12))]],
    ),
    "topo_order": ([[1, []], [2, [[1, 0]]], [2, [[0, 0]]], [3, []], [4, [[3, 2], [2, 1], [1, 0]]]], _dag),
    "count_islands": (["1 1\n#\n", "1 1\n.\n", "2 3\n###\n###\n", "3 3\n.#.\n###\n.#.\n"], _islands),
    "insert_position": (
        [[[5], 1], [[5], 5], [[5], 9], [[1, 1, 2, 2], 2], [[-3, 0, 4], -1], [[1, 2, 3, 4, 5], 0]],
        lambda r: [sorted(r.randint(0, 20) for _ in range(r.randint(0, 10))), r.randint(-1, 21)],
    ),
    "knapsack": (
        [
            [[1], [1], 0],
            [[2, 2], [3, 3], 4],
            [[1, 2, 3], [6, 10, 12], 5],
            [[4, 3, 2], [10, 7, 6], 5],
            [[3, 4, 5], [30, 50, 60], 8],
        ],
        lambda r: (
            lambda n: [[r.randint(1, 10) for _ in range(n)], [r.randint(1, 30) for _ in range(n)], r.randint(0, 25)]
        )(r.randint(1, 6)),
    ),
    "evaluate_expression": (
        ["0\n", "1 - 2\n", "2 * (3 + 4) * 5\n", "100 - (20 - 5) * 2\n", "8 - 2 * 3 - 1\n"],
        lambda r: _expression(r) + "\n",
    ),
    "num_decodings": (
        [["0"], ["1"], ["27"], ["100"], ["2101"], ["1201234"], ["30"]],
        lambda r: ["".join(r.choice("0112223456789") for _ in range(r.randint(1, 12)))],
    ),
    "word_break": (
        [
            ["a", ["a"]],
            ["ab", ["a"]],
            ["leetcode", ["leet", "code"]],
            ["aaab", ["a", "aa"]],
            ["abab", ["ab", "aba", "b"]],
        ],
        lambda r: (
            lambda words: [
                "".join(r.choice(words) for _ in range(r.randint(1, 4))) + r.choice(["", "", "z", "b"]),
                words,
            ]
        )(_words(r, r.randint(1, 4), "ab", 3)),
    ),
}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _normal_stdin(text: str) -> str:
    return " ".join(text.split())


def revealed_inputs(record: dict[str, Any]) -> set[str]:
    """Canonical forms of every input the task reveals: its shown tests' inputs (call arguments,
    stdin, and the literal arguments of calls to the entry point in assert code) and the calls and
    inputs its statement quotes."""
    entry = record.get("entry_point")
    out: set[str] = set()
    sources = [t["assert"] for t in record["tests"] if "assert" in t]
    sources += re.findall(r"`([^`]*)`", record["prompt"])  # the statement's inline code: its examples
    for t in record["tests"]:
        if "args" in t:
            out.add(_canonical(t["args"]))
        if "stdin" in t:
            out.add(_normal_stdin(t["stdin"]))
    for text in sources:
        try:
            tree = ast.parse(text.strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry:
                try:
                    out.add(_canonical([ast.literal_eval(a) for a in node.args]))
                except ValueError:
                    pass  # not a literal (e.g. `'a' * 1000`): nothing a held-out literal could repeat
    if not entry:
        out.add(_normal_stdin(record["prompt"]))
    return out


def _is_revealed(record: dict[str, Any], candidate: Any, revealed: set[str]) -> bool:
    if record.get("entry_point"):
        return _canonical(candidate) in revealed
    key = _normal_stdin(candidate)
    return key in revealed or (len(key) > 2 and key in _normal_stdin(record["prompt"]))


def run_solution(code: str, entry: str | None, inputs: list[Any]) -> list[Any]:
    """The solution's result on each input, run in a child Python (our own code; bounded in time).
    A call's result is its JSON round trip; a program's is its stdout; a failure is None. The hash
    seed is fixed: a wrong solution's output may depend on set order (`list(set(items))`)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if entry:
        script = (
            f"import json, sys\nns = {{}}\nexec(compile({code!r}, 'solution', 'exec'), ns)\n"
            "out = []\nfor args in json.loads(sys.stdin.read()):\n"
            f"    try:\n        out.append(json.loads(json.dumps(ns[{entry!r}](*args))))\n"
            "    except Exception:\n        out.append({'__failed__': True})\nprint(json.dumps(out))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(inputs),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=env,
        )
        return json.loads(done.stdout)
    results = []
    for stdin in inputs:
        done = subprocess.run(
            [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=30, env=env
        )
        results.append(done.stdout if done.returncode == 0 else None)
    return results


def heldout_for(record: dict[str, Any]) -> list[dict[str, Any]]:
    edges, generate = GENERATORS[record["id"]]
    rng = random.Random(f"heldout:{record['id']}")
    pool = [copy.deepcopy(e) for e in edges] + [generate(rng) for _ in range(POOL)]
    revealed, seen, fresh = revealed_inputs(record), set(), []
    for candidate in pool:
        key = _canonical(candidate) if record.get("entry_point") else _normal_stdin(candidate)
        if key in seen or _is_revealed(record, candidate, revealed):
            continue
        seen.add(key)
        fresh.append(candidate)
    entry = record.get("entry_point")
    want = run_solution(record["reference"], entry, fresh)
    got = run_solution(record["wrong"], entry, fresh)
    usable = [
        (c, w, g)
        for c, w, g in zip(fresh, want, got)
        if w is not None and not (isinstance(w, dict) and w.get("__failed__"))
    ]
    differs = [u for u in usable if u[1] != u[2]]
    if not differs:
        raise SystemExit(f"{record['id']}: the wrong solution agrees with the reference on every candidate")
    # Up to half on which the wrong solution differs (edge cases first), then the rest in order.
    chosen = differs[: max(1, HELDOUT // 2)]
    chosen += [u for u in usable if u not in chosen][: HELDOUT - len(chosen)]
    chosen.sort(key=lambda u: usable.index(u))
    if entry:
        return [{"fn": entry, "args": c, "expected": w} for c, w, _ in chosen]
    return [{"stdin": c, "stdout": w} for c, w, _ in chosen]


def check_in_sandbox(records: list[dict[str, Any]]) -> list[str]:
    """The reference passes every test and the wrong solution fails a held-out test, in the real sandbox."""
    sys.path.insert(0, str(ROOT))
    from rlvr import sandbox
    from rlvr.envs.tasks.code import fenced
    from rlvr.verifiers import code as code_verifier

    box, problems = sandbox.shared_sandbox(), []
    for r in records:
        entry, settings = r.get("entry_point"), code_verifier.RunSettings(fail_fast=False)
        ref = code_verifier.verify(
            fenced(r["reference"]), r["tests"] + r["heldout_tests"], box, function=entry, settings=settings
        )
        wrong = code_verifier.verify(fenced(r["wrong"]), r["heldout_tests"], box, function=entry, settings=settings)
        if ref.score != 1.0:
            problems.append(f"{r['id']}: the reference fails: {ref.outcome} {ref.detail}")
        if wrong.outcome.value != "incorrect":
            problems.append(f"{r['id']}: the wrong solution is not failed by a held-out test: {wrong.outcome}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    parser.add_argument("--no-sandbox", action="store_true", help="skip the check in the Docker sandbox")
    args = parser.parse_args()
    records = [json.loads(line) for line in TASKS.read_text(encoding="utf-8").splitlines() if line.strip()]
    missing = sorted({r["id"] for r in records} - set(GENERATORS))
    if missing:
        raise SystemExit(f"no generator for {missing}")
    fresh = []
    for r in records:
        out = {k: v for k, v in r.items() if k != "heldout_tests"}
        out["heldout_tests"] = heldout_for(r)
        fresh.append(out)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fresh)
    if args.check:
        if text != TASKS.read_text(encoding="utf-8"):
            print(f"{TASKS} differs from a fresh generation", file=sys.stderr)
            return 1
    else:
        TASKS.write_text(text, encoding="utf-8")
    problems = [] if args.no_sandbox else check_in_sandbox(fresh)
    for p in problems:
        print(p, file=sys.stderr)
    print(
        f"{len(fresh)} tasks, {sum(len(r['heldout_tests']) for r in fresh)} held-out tests"
        f"{'' if args.no_sandbox else ', checked in the sandbox'}: {'problems' if problems else 'ok'}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
