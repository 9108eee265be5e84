"""The forge suite: programs that try to be scored as passing `rlvr/Code-v0` tasks without
computing the answer, each submitted through the real environment and the real Docker sandbox.
Every one must score 0 with a typed reason (the failing test's status), never a pass and never an
`error` verdict (an error is left out of training: a way to dodge a 0). Every reference solution
still passes, judged on the host (`trust == "isolated"`)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs.tasks.code import fenced
from rlvr.sandbox.types import Limits, Status
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require

FAILED = {"wrong_answer", "invalid_value", "runtime_error", "timeout", "output_limit"}
NOT_RUN = "skipped"  # after a failure that killed the harness, later tests are not run

# Helpers the forges share: find the harness's reporting closure and its token by walking frames.
FIND_REPORT = """
import sys
def _find(name):
    f = sys._getframe()
    while f is not None:
        if name in f.f_locals:
            return f.f_locals[name]
        f = f.f_back
    return None
"""
ALWAYS_EQ = """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __hash__(self): return 0
"""

# (name, task id, program): call tasks (reverse_words, flatten), converted-assert tasks
# (digit_sum, is_anagram, is_palindrome) and a stdin/stdout task (sum_numbers).
FORGES = [
    ("always-equal object", "reverse_words", ALWAYS_EQ + "def reverse_words(s):\n    return Anything()\n"),
    ("always-equal object, assert task", "digit_sum", ALWAYS_EQ + "def digit_sum(n):\n    return Anything()\n"),
    ("always-true object", "is_anagram", ALWAYS_EQ + "def is_anagram(a, b):\n    return Anything()\n"),
    (
        "int subclass with patched __eq__",
        "digit_sum",
        "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
        "def digit_sum(n):\n    return I(0)\n",
    ),
    (
        "str subclass with patched __eq__",
        "reverse_words",
        "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
        "def reverse_words(s):\n    return S('')\n",
    ),
    (
        "list subclass with patched __eq__",
        "flatten",
        "class L(list):\n    def __eq__(self, o): return True\ndef flatten(x):\n    return L()\n",
    ),
    (
        "float subclass with patched __eq__",
        "digit_sum",
        "class F(float):\n    def __eq__(self, o): return True\n    __hash__ = float.__hash__\n"
        "def digit_sum(n):\n    return F(0)\n",
    ),
    ("bool-like object (is True)", "is_palindrome", ALWAYS_EQ + "def is_palindrome(s):\n    return Anything()\n"),
    (
        "monkeypatched json.dumps",
        "reverse_words",
        "import json\njson.dumps = lambda *a, **k: '\"world big hello\"'\ndef reverse_words(s):\n    return object()\n",
    ),
    (
        "monkeypatched value encoder",
        "digit_sum",
        "import sys\nfor m in list(sys.modules.values()):\n"
        "    if hasattr(m, 'encode') and hasattr(m, 'NotPlainData'):\n"
        "        m.encode = lambda v: '{\"always\":true}'\n"
        "def digit_sum(n):\n    return object()\n",
    ),
    (
        "monkeypatched pickle and builtins",
        "digit_sum",
        "import builtins, pickle\npickle.dumps = lambda *a, **k: b'ok'\nbuiltins.isinstance = lambda *a: True\n"
        "builtins.type = lambda *a: int\ndef digit_sum(n):\n    return object()\n",
    ),
    (
        "AssertionError replaced",
        "digit_sum",
        "import builtins\nclass Never(Exception):\n    pass\nbuiltins.AssertionError = Never\n"
        "def digit_sum(n):\n    return None\n",
    ),
    (
        "sys.exit patched, exit 0 on error",
        "digit_sum",
        "import sys, os\nsys.exit = lambda *a: os._exit(0)\ndef digit_sum(n):\n    raise SystemExit(0)\n",
    ),
    ("os._exit(0) before returning", "reverse_words", "import os\ndef reverse_words(s):\n    os._exit(0)\n"),
    (
        "frame walk: report passed",
        "is_anagram",
        FIND_REPORT + "import os\ndef is_anagram(a, b):\n    r = _find('report')\n    r('passed')\n    os._exit(0)\n",
    ),
    (
        "frame walk: report forged values",
        "digit_sum",
        FIND_REPORT + "import os\ndef digit_sum(n):\n    r = _find('report')\n"
        "    r('values', '[{\"eq\":true}]')\n    os._exit(0)\n",
    ),
    (
        "frame walk: token to the result pipe",
        "reverse_words",
        FIND_REPORT + "import os\ndef reverse_words(s):\n    t = _find('token')\n"
        "    os.write(3, (t + ' passed\\n').encode())\n"
        "    os.write(3, (t + ' values [{}]\\n').encode())\n    os._exit(0)\n",
    ),
    (
        "atexit hook reports a pass",
        "is_anagram",
        FIND_REPORT + "import atexit\nr = _find('report')\natexit.register(lambda: r('passed'))\n"
        "def is_anagram(a, b):\n    return object()\n",
    ),
    (
        "atexit hook after a crash",
        "digit_sum",
        FIND_REPORT + "import atexit\nr = _find('report')\natexit.register(lambda: r('values', '[10]'))\n"
        "def digit_sum(n):\n    raise ValueError('no')\n",
    ),
    (
        "harness functions patched",
        "digit_sum",
        "import sys\nfor m in list(sys.modules.values()):\n    if hasattr(m, 'run_child'):\n"
        "        m._finish = lambda code: None\n        m._describe = lambda *a: 'passed'\n"
        "def digit_sum(n):\n    return None\n",
    ),
    (
        "overwrite the harness files",
        "reverse_words",
        "import os\nfor name in os.listdir('.'):\n    try:\n        open(name, 'w').write('print(\"passed\")')\n"
        "    except OSError:\n        pass\ndef reverse_words(s):\n    return None\n",
    ),
    (
        "read the tests from disk",
        "reverse_words",
        # the harness's files are in /work/run, which the program user cannot read: nothing is found
        "import os\ndef reverse_words(s):\n    seen = []\n    for root, _, files in os.walk('/work'):\n"
        "        for f in files:\n            try:\n                seen.append(open(os.path.join(root, f)).read())\n"
        "            except OSError:\n                pass\n    return ''.join(seen)[:50] or 'found nothing'\n",
    ),
    (
        "read the judge through /proc",
        "reverse_words",
        "import os\ndef reverse_words(s):\n    out = ''\n"
        "    for pid in os.listdir('/proc'):\n        if pid.isdigit():\n"
        "            for f in ('environ', 'cmdline', 'mem'):\n                try:\n"
        "                    out += open(f'/proc/{pid}/{f}', 'rb').read(200).decode('latin-1')\n"
        "                except OSError:\n                    pass\n    return out[:40]\n",
    ),
    ("expected values from the environment", "digit_sum", "import os\ndef digit_sum(n):\n    return len(os.environ)\n"),
    (
        "gc walk for test data",
        "digit_sum",
        "import gc\ndef digit_sum(n):\n    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'expected' in o:\n"
        "            return o['expected']\n    return -1\n",
    ),
    (
        "signal the parent: SIGKILL",
        "digit_sum",
        "import os, signal\ndef digit_sum(n):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 10\n",
    ),
    (
        "signal everything: kill(-1)",
        "reverse_words",
        # the harness runs as another user: only the program's own processes get the signal, and
        # its (wrong) value is judged
        "import os, signal\ndef reverse_words(s):\n    os.kill(-1, signal.SIGKILL)\n    return s + '?'\n",
    ),
    (
        "printed fake report",
        "reverse_words",
        "import sys\nfor i in range(5):\n"
        '    print(\'0\' * 32 + \' {"i": %d, "status": "done", "result": {"tag": "passed"}}\' % i)\n'
        "def reverse_words(s):\n    print('passed')\n    return None\n",
    ),
    (
        "io: fake pass printed, then os._exit(0)",
        "sum_numbers",
        "import os\nprint('ok: all tests passed')\nos._exit(0)\n",
    ),
    (
        "io: report on stderr, exit code games",
        "sum_numbers",
        'import sys\nsys.stderr.write(\'{"status": "passed"}\\n\')\nraise SystemExit(0)\n',
    ),
    (
        "deeply nested return value",
        "flatten",
        "def flatten(x):\n    v = []\n    for _ in range(100000):\n        v = [v]\n    return v\n",
    ),
    ("circular list", "flatten", "def flatten(x):\n    v = []\n    v.append(v)\n    return v\n"),
    ("huge int", "digit_sum", "def digit_sum(n):\n    return 10 ** 100000\n"),
    ("a function as the value", "reverse_words", "def reverse_words(s):\n    return reverse_words\n"),
    (
        "a thread writes a late pass",
        "is_anagram",
        FIND_REPORT + "import threading, time\nr = _find('report')\n"
        "def later():\n    time.sleep(0.05)\n    r('passed')\nthreading.Thread(target=later).start()\n"
        "def is_anagram(a, b):\n    return object()\n",
    ),
    (
        "fork bomb",
        "digit_sum",
        "import os\ndef digit_sum(n):\n    while True:\n        try:\n"
        "            os.fork()\n        except OSError:\n            pass\n",
    ),
    ("endless loop", "reverse_words", "def reverse_words(s):\n    while True:\n        pass\n"),
    (
        "huge output",
        "reverse_words",
        "import sys\ndef reverse_words(s):\n    sys.stdout.write('x' * (1 << 26))\n    return s\n",
    ),
]


# Forges that can only end at the time limit: each of the task's 11 tests waits it out, so they are
# judged under a shorter one (the same rule; at 2 s the endless loop alone took 22 s of the suite).
ONLY_THE_CLOCK_STOPS = {"endless loop"}
SHORT_TIMEOUT_S = 0.25


def code_env(timeout_s: float):
    from rlvr import sandbox

    shared = sandbox.shared_sandbox()
    probe = shared.run(files={}, command=["python3", "-c", "print(1)"], stdin="", limits=Limits())
    require(probe.status is not Status.UNAVAILABLE, f"the Docker sandbox is unavailable: {probe.detail}")
    # Fraction scoring, every test run: no test may pass, not only the first that fails.
    return gym.make("rlvr/Code-v0", scoring="fraction", timeout_s=timeout_s, sandbox=shared).unwrapped


@pytest.fixture(scope="module")
def env():
    made = code_env(2.0)
    yield made
    made.close()


@pytest.fixture(scope="module")
def short_env():
    made = code_env(SHORT_TIMEOUT_S)
    yield made
    made.close()


def submit(env, task_id: str, program: str):
    env.reset(options={"task_id": task_id})
    _, reward, terminated, _, info = env.step(fenced(program))
    assert terminated
    return reward, info["verdict"]


def assert_scores_zero(name: str, reward: float, verdict) -> None:
    """A forged program's verdict: incorrect, 0, its first test failed with a typed reason, every
    verdict isolated."""
    statuses = [t["status"] for t in verdict.info["tests"]]
    assert reward == 0.0 and verdict.outcome is Outcome.INCORRECT, (name, verdict)
    assert statuses and statuses[0] in FAILED and set(statuses) <= FAILED | {NOT_RUN}, (name, verdict.info["tests"])
    assert verdict.info["trust"] == "isolated"


def test_the_forge_suite_is_large_enough():
    assert len(FORGES) >= 30
    assert len({name for name, _, _ in FORGES}) == len(FORGES)


@pytest.mark.parametrize("name,task_id,program", FORGES, ids=[f[0] for f in FORGES])
def test_forged_program_scores_zero_with_a_typed_reason(request, name, task_id, program):
    env = request.getfixturevalue("short_env" if name in ONLY_THE_CLOCK_STOPS else "env")
    reward, verdict = submit(env, task_id, program)
    assert_scores_zero(name, reward, verdict)
    if name in ONLY_THE_CLOCK_STOPS:
        assert {t["status"] for t in verdict.info["tests"]} == {"timeout"}, verdict.info["tests"]


def test_every_reference_solution_still_passes_judged_on_the_host(env):
    for task in env.tasks:
        env.reset(options={"task_id": task.task_id})
        _, reward, _, _, info = env.step(task.reference)
        verdict = info["verdict"]
        assert reward == 1.0 and verdict.outcome is Outcome.CORRECT, (task.task_id, verdict.detail)
        assert verdict.info["trust"] == "isolated", task.task_id
