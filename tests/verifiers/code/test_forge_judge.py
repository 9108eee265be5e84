"""The judge (issue #26.2): assert tests that the host cannot evaluate (loops, helpers,
comprehensions, lambdas in HumanEval's `check(candidate)`, MBPP loops) run in the harness's judge,
a process holding none of the program's code, where the program's functions are proxies that
return plain data. Records in the HumanEval, MBPP, APPS (call-based) and rlvr shapes go through
`rlvr/CodeDataset-v0` and the real Docker sandbox: correct programs pass with
`trust == "isolated"`; hostile programs (forged values, frame and memory walks for the test code,
patched builtins, lying helpers, hijacked imports, killing or stopping the judge, writing to
inherited fds, fake report lines) score 0 with a typed reason, never a pass and never `error`."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs.tasks.code import fenced
from rlvr.sandbox.types import Limits, Status
from rlvr.verifiers import code
from rlvr.verifiers.code import judged_asserts
from rlvr.verifiers.verdict import Outcome
from tests.verifiers.code.test_forge import assert_scores_zero, submit

# HumanEval shape: the expected values sit in the test code only, and the one call site is
# `all(map(...))` (a StopIteration raised into it would end the iteration and pass the test).
SECRET = {
    "task_id": "Judge/secret",
    "entry_point": "secret",
    "prompt": 'def secret(x: int) -> int:\n    """Return x * 7919 + 104729."""\n',
    "canonical_solution": "    return x * 7919 + 104729\n",
    "test": "EXPECTED = {0: 104729, 1: 112648, 2: 120567, 3: 128486}\n\n\n"
    "def check(candidate):\n    assert all(map(lambda x: candidate(x) == EXPECTED[x], EXPECTED))\n",
}
# HumanEval shape with a helper from the prompt that the test calls (as HumanEval/38 and /50 do).
SHIFT = {
    "task_id": "Judge/shift",
    "entry_point": "decode_shift",
    "prompt": 'import string\n\n\ndef encode_shift(s: str) -> str:\n    """Shift every letter by 5."""\n'
    '    return "".join(chr((ord(c) - 97 + 5) % 26 + 97) for c in s)\n\n\n'
    'def decode_shift(s: str) -> str:\n    """Undo encode_shift."""\n',
    "canonical_solution": '    return "".join(chr((ord(c) - 97 - 5) % 26 + 97) for c in s)\n',
    "test": "def check(candidate):\n    import random\n    import string\n    rng = random.Random(7)\n"
    "    for _ in range(30):\n"
    "        s = ''.join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 20)))\n"
    "        assert candidate(encode_shift(s)) == s\n",
}
# HumanEval shape: the test checks that the argument was sorted in place.
SORT = {
    "task_id": "Judge/sort",
    "entry_point": "sort_in_place",
    "prompt": 'def sort_in_place(xs: list) -> None:\n    """Sort xs ascending, in place; return None."""\n',
    "canonical_solution": "    xs.sort()\n",
    "test": "def check(candidate):\n    for xs in ([3, 1, 2], [], [5, 5, -1], [[2], [1]]):\n"
    "        ys = [list(x) if isinstance(x, list) else x "
    "for x in xs]\n        assert candidate(ys) is None\n        assert ys == sorted(xs)\n",
}
# MBPP shape: a setup helper and a comprehension, and a loop.
MBPP = {
    "task_id": 902,
    "text": "Write a function evens(xs) returning the even numbers of xs, in order.",
    "code": "def evens(xs):\n    return [x for x in xs if x % 2 == 0]",
    "test_setup_code": "def _want(n):\n    return list(range(0, n, 2))",
    "test_list": [
        "assert all(evens(list(range(n))) == _want(n) for n in range(12))",
        "for n in (3, -4, 10):\n    assert evens([n, n + 1]) == [v for v in (n, n + 1) if v % 2 == 0]",
    ],
}
# APPS call-based: emitted as plain calls judged on the host.
APPS = {
    "problem_id": 903,
    "question": "Write `add_pairs(a, b)` returning [a + b, a - b].",
    "input_output": {
        "fn_name": "add_pairs",
        "inputs": [[1, 2], [10, -3], [0, 0]],
        "outputs": [[[3, -1]], [7, 13], [[0, 0]]],
    },
    "solutions": json.dumps(["def add_pairs(a, b):\n    return [a + b, a - b]\n"]),
}
# rlvr shape: the test expects an exception of the program's.
ROOT = {
    "id": "Judge/root",
    "prompt": "Write `int_root(v)`: the integer square root; ValueError for v < 0.",
    "entry_point": "int_root",
    "tests": [
        {
            "assert": "for v in (0, 1, 4, 10, 99):\n    assert int_root(v) == int(v ** 0.5)\ntry:\n    int_root(-1)\n"
            "except ValueError:\n    pass\nelse:\n    raise AssertionError('no ValueError for -1')\n"
        }
    ],
    "reference": "import math\ndef int_root(v):\n    if v < 0:\n        raise ValueError(v)\n"
    "    return math.isqrt(v)\n",
    "wrong": "def int_root(v):\n    return int(abs(v) ** 0.5)\n",
}
RECORDS = [SECRET, SHIFT, SORT, MBPP, APPS, ROOT]

# A thief: looks for the EXPECTED table of the SECRET task wherever it might be and answers from
# it (it would pass wherever the test code is within its reach). `SOURCES` picks where to look.
THIEF = """
import ast, gc, os, sys
MARK = "".join(["EXPECT", "ED = {"])

def _parse(text):
    i = text.find(MARK)
    while i >= 0:
        j = text.find("}", i)
        try:
            table = ast.literal_eval(text[i + len(MARK) - 1:j + 1])
            if isinstance(table, dict) and table and all(type(k) is int for k in table):
                return table
        except Exception:
            pass
        i = text.find(MARK, i + 1)
    return None

def _from_bytes(data):
    return _parse(data.decode("latin-1")) if MARK.encode() in data else None

def _memory(pid):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        return None
    for line in maps:
        span, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in span.split("-"))
        if "r" not in perms or hi - lo > 1 << 27:
            continue
        try:
            mem.seek(lo)
            found = _from_bytes(mem.read(hi - lo))
        except (OSError, ValueError, OverflowError):
            continue
        if found:
            return found
    return None

def _frames():
    f = sys._getframe()
    while f is not None:
        for scope in (f.f_locals, f.f_globals):
            if isinstance(scope.get("EXPECTED"), dict):
                return scope["EXPECTED"]
            for v in list(scope.values()):
                if isinstance(v, str) and _parse(v):
                    return _parse(v)
        f = f.f_back
    import inspect
    for info in inspect.stack():
        if "check" in info.frame.f_globals or "candidate" in info.frame.f_locals:
            return info.frame.f_globals.get("EXPECTED")
    for ref in gc.get_referrers(secret):
        if isinstance(ref, dict) and isinstance(ref.get("EXPECTED"), dict):
            return ref["EXPECTED"]
    return None

def _gc():
    for o in gc.get_objects():
        if isinstance(o, dict) and set(o) >= {0, 1, 2, 3} and all(type(v) is int for v in o.values()):
            return o
        if isinstance(o, dict):
            for v in list(o.values()):
                if isinstance(v, dict) and set(v) >= {0, 1, 2, 3}:  # dicts of ints are not tracked by gc
                    return v
                if isinstance(v, (str, bytes, bytearray)) and len(v) < 1 << 20:
                    found = _parse(v) if isinstance(v, str) else _from_bytes(bytes(v))
                    if found:
                        return found
    return None

def _others():
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        found = _memory(name)
        if found:
            return found
        for leaf in ("environ", "cmdline"):
            try:
                found = _from_bytes(open(f"/proc/{name}/{leaf}", "rb").read())
            except OSError:
                found = None
            if found:
                return found
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                with open(f"/proc/{name}/fd/{fd}", "rb") as handle:
                    os.set_blocking(handle.fileno(), False)
                    found = _from_bytes(handle.read(1 << 20) or b"")
            except (OSError, TypeError):
                found = None
            if found:
                return found
    return None

def _files():
    for top in (".", "/tmp", "/dev/shm", "/work"):
        for root, _, names in os.walk(top):
            for n in names:
                try:
                    found = _from_bytes(open(os.path.join(root, n), "rb").read(1 << 22))
                except OSError:
                    found = None
                if found:
                    return found
    return None

def secret(x):
    for source in SOURCES:
        table = {"frames": _frames, "gc": _gc, "memory": lambda: _memory("self"), "others": _others,
                 "files": _files}[source]()
        if table and x in table:
            return table[x]
    return -1
"""

# Find the pids of the other harness processes: everything but me, my parent (the worker) and
# its parent (the outer process): the judge server and the judge.
OTHERS = """
import os, signal
def _others():
    me = os.getpid()
    keep = {me, os.getppid()}
    with open(f"/proc/{os.getppid()}/stat") as f:
        keep.add(int(f.read().rsplit(")", 1)[1].split()[1]))
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in keep and int(p) > 1]
"""

# (name, task id, program)
FORGES = [
    (
        "always-equal object",
        "Judge/secret",
        "class A:\n    def __eq__(self, o): return True\n    __hash__ = object.__hash__\n"
        "def secret(x):\n    return A()\n",
    ),
    (
        "int subclass with patched __eq__",
        "Judge/secret",
        "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
        "def secret(x):\n    return I(0)\n",
    ),
    (
        "str subclass with patched __eq__",
        "Judge/shift",
        "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
        "def decode_shift(s):\n    return S('')\n",
    ),
    (
        "list subclass with patched __eq__",
        "902",
        "class L(list):\n    def __eq__(self, o): return True\ndef evens(xs):\n    return L()\n",
    ),
    ("StopIteration into all(map(...))", "Judge/secret", "def secret(x):\n    raise StopIteration\n"),
    ("frame walk for the test code", "Judge/secret", "SOURCES = ['frames']\n" + THIEF),
    ("gc walk for the test code", "Judge/secret", "SOURCES = ['gc']\n" + THIEF),
    ("own memory scan for the test code", "Judge/secret", "SOURCES = ['memory']\n" + THIEF),
    ("/proc/<pid>/mem, fds and environ of other processes", "Judge/secret", "SOURCES = ['others']\n" + THIEF),
    ("files on disk", "Judge/secret", "SOURCES = ['files']\n" + THIEF),
    (
        "patched builtins and assert machinery",
        "Judge/secret",
        "import builtins\nclass Never(Exception):\n    pass\nbuiltins.AssertionError = Never\n"
        "builtins.all = lambda *a: True\nbuiltins.map = lambda *a: iter(())\nbuiltins.isinstance = lambda *a: True\n"
        "def secret(x):\n    return -1\n",
    ),
    (
        "shadowing builtins the test calls",
        "902",
        "def all(*a):\n    return True\ndef sorted(*a, **k):\n    return []\ndef list(*a):\n    return []\n"
        "def range(*a):\n    return []\ndef evens(xs):\n    return [0]\n",
    ),
    (
        "a lying helper with the prompt's name",
        "Judge/shift",
        "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n",
    ),
    (
        "hijacked import: random.py in the working directory",
        "Judge/shift",
        "open('random.py', 'w').write('class Random:\\n    def __init__(self, *a): pass\\n'\n"
        "    '    def randint(self, a, b): return 0\\n    def choice(self, s): return \"\"\\n')\n"
        "open('string.py', 'w').write('ascii_lowercase = \"\"\\n')\n"
        "def decode_shift(s):\n    return s\n",
    ),
    (
        "the module bound to a builtin's name",
        "Judge/secret",
        "import os as all\nimport sys as map\ndef secret(x):\n    return -1\n",
    ),
    (
        "kill the judge and the spare judges",
        "Judge/secret",
        OTHERS + "def secret(x):\n    for pid in _others():\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
        "        except OSError:\n            pass\n    return -1\n",
    ),
    (
        "stop the judge and the spare judges",
        "Judge/secret",
        OTHERS + "def secret(x):\n    for pid in _others():\n        try:\n            os.kill(pid, signal.SIGSTOP)\n"
        "        except OSError:\n            pass\n    return -1\n",
    ),
    (
        "kill the parent (the worker)",
        "Judge/secret",
        "import os, signal\ndef secret(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return -1\n",
    ),
    (
        "kill everything it can",
        "Judge/secret",
        "import os, signal\ndef secret(x):\n    os.kill(-1, signal.SIGKILL)\n    return -1\n",
    ),
    (
        "write verdicts to every inherited fd",
        "Judge/secret",
        "import os\ndef secret(x):\n    for fd in range(256):\n"
        "        for line in (b'passed \\n', b'[\"ok\", 104729, null]\\n', b'1\\npassed \\n'):\n"
        "            try:\n                os.write(fd, line)\n"
        "            except OSError:\n                pass\n    return -1\n",
    ),
    (
        "a forged handshake",
        "Judge/secret",
        'import os\nos.write(3, b\'["ready", ["all", "map", "check"], ["os"]]\\n\')\ndef secret(x):\n    return -1\n',
    ),
    (
        "printed fake report lines",
        "Judge/secret",
        "for i in range(3):\n"
        '    print(\'0\' * 32 + \' {"i": %d, "status": "done", "result": {"tag": "passed"}}\' % i)\n'
        "    print('passed')\ndef secret(x):\n    print('passed')\n    return -1\n",
    ),
    ("sys.exit(0) in the function", "Judge/secret", "import sys\ndef secret(x):\n    sys.exit(0)\n"),
    ("os._exit(0) in the function", "Judge/root", "import os\ndef int_root(v):\n    os._exit(0)\n"),
    ("an argument left unsorted but a claim of None", "Judge/sort", "def sort_in_place(xs):\n    return None\n"),
    ("a value that is not plain data", "Judge/root", "def int_root(v):\n    return iter([v])\n"),
    (
        "the wrong exception",
        "Judge/root",
        "import math\ndef int_root(v):\n    if v < 0:\n        raise TypeError(v)\n    return math.isqrt(v)\n",
    ),
]


@pytest.fixture(scope="module")
def env(box, tmp_path_factory):
    path = tmp_path_factory.mktemp("judge") / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    made = gym.make("rlvr/CodeDataset-v0", path=str(path), scoring="fraction", timeout_s=2.0, sandbox=box).unwrapped
    yield made
    made.close()


def test_records_take_the_path_they_are_meant_to():
    """HumanEval, MBPP and rlvr test code here is beyond the converter (the judge runs it); APPS
    call-based tests are plain calls the host judges."""
    from rlvr.envs.tasks.code_dataset import load_dataset, normalise_record

    tasks = {t.task_id: t for t in load_dataset_from(RECORDS, load_dataset)}
    for task_id in ("Judge/secret", "Judge/shift", "Judge/sort", "902", "Judge/root"):
        assert all(judged_asserts.convert(t.code) is None for t in tasks[task_id].answer), task_id
    assert all(judged_asserts.convert(t.code) is not None for t in tasks["903"].answer)
    shift = normalise_record(SHIFT, 1)["tests"][0]["assert"]
    assert shift.index("def encode_shift") < shift.index("def check")  # the prompt's helper, in the test
    assert "def check" in normalise_record(SECRET, 1)["tests"][0]["assert"]


def load_dataset_from(records, load_dataset):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "tasks.jsonl")
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return load_dataset(path)


def test_correct_programs_pass_judged_in_isolation(env):
    for task in env.tasks:
        env.reset(options={"task_id": task.task_id})
        _, reward, _, _, info = env.step(task.reference)
        verdict = info["verdict"]
        assert reward == 1.0 and verdict.outcome is Outcome.CORRECT, (task.task_id, verdict.detail)
        assert verdict.info["trust"] == "isolated"
        assert {t["trust"] for t in verdict.info["tests"]} == {"isolated"}


def test_wrong_programs_fail_with_the_test_line(env):
    reward, verdict = submit(env, "Judge/root", ROOT["wrong"])
    assert reward == 0.0 and verdict.info["tests"][0]["status"] == "wrong_answer"
    assert "no ValueError for -1" in verdict.detail
    # as in APPS, a tuple counts as a list
    reward, verdict = submit(env, "903", "def add_pairs(a, b):\n    return (a + b, a - b)\n")
    assert reward == 1.0, verdict.detail


def test_the_forge_suite_is_large_enough():
    assert len(FORGES) >= 25
    assert len({name for name, _, _ in FORGES}) == len(FORGES)


@pytest.mark.parametrize("name,task_id,program", FORGES, ids=[f[0] for f in FORGES])
def test_forged_program_scores_zero_with_a_typed_reason(env, name, task_id, program):
    reward, verdict = submit(env, task_id, program)
    assert_scores_zero(name, reward, verdict)


def test_a_program_cannot_read_its_own_request_from_memory(box):
    """The runner wipes its child's copy of the request (files and stdin) before the program
    runs: the harness's stdin (the nonce, the judged test code) is not in the program's memory."""
    program = (
        "import ctypes, sys\nf, hits = sys._getframe(), 0\nwhile f is not None:\n"
        "    b = f.f_locals.get('blob')\n    if isinstance(b, (bytes, bytearray)):\n"
        "        hits += bytes(b).count(b'SECRET-')\n    f = f.f_back\nprint(hits)\n"
    )
    result = box.run(files={"p.py": program}, command=["python3", "p.py"], stdin="SECRET-" * 100, limits=Limits())
    assert result.status is Status.OK and result.stdout.strip() == "0", (result.stdout, result.stderr[-300:])


def test_a_test_that_never_calls_the_program_does_not_pass(box):
    test = code.AssertTest("for i in range(3):\n    assert i >= 0\n")
    verdict = code.verify(fenced("def f(x):\n    return x\n"), [test], sandbox=box)
    assert verdict.score == 0.0 and verdict.info["tests"][0]["status"] == "runtime_error"
    assert "never called the program" in verdict.detail


def test_arguments_that_are_not_plain_data_fail_typed(box):
    test = code.AssertTest("for g in (len, abs):\n    assert apply(g, -3) == g(-3)\n")
    verdict = code.verify(fenced("def apply(g, x):\n    return g(x)\n"), [test], sandbox=box)
    assert verdict.score == 0.0 and verdict.info["tests"][0]["status"] == "runtime_error"
    assert "cannot cross to the program" in verdict.detail


def test_every_builtin_feedback_task_is_judged_in_isolation(box):
    """rlvr/CodeFeedback-v0 pays on held-out tests too: every reference passes them, isolated."""
    made = gym.make("rlvr/CodeFeedback-v0", sandbox=box).unwrapped
    try:
        for task in made.tasks:
            made.reset(options={"task_id": task.task_id})
            _, reward, _, _, info = made.step(task.reference)
            verdict = info["verdict"]
            assert reward == 1.0 and verdict.outcome is Outcome.CORRECT, (task.task_id, verdict.detail)
            assert verdict.info["trust"] == "isolated", task.task_id
    finally:
        made.close()
