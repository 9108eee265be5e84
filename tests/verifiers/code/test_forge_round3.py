"""Round 3 of the code forge (issue 40), each class through the real environments and the real
Docker sandbox: hostile programs that attack the harness (its uid), stall the verifier with slow
wrong answers, break logs and prompts with sandbox text, reach held-out inputs from a shown test,
supply builtins to converted asserts, or fake a large value. Each scores 0 with a typed reason,
never `error`, and within seconds; the honest programs still pass."""

from __future__ import annotations

import json
import time

import gymnasium as gym
import pytest

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs import episode_log
from rlvr.envs.tasks.code import fenced
from rlvr.verifiers import code
from rlvr.verifiers.verdict import Outcome

FAILED = {"wrong_answer", "invalid_value", "runtime_error", "timeout", "output_limit"}

# ---- 1. the harness's processes are out of the program's reach ----------------------------------
# Each attack runs at the program's load, on every other process it can see: the worker, the relay
# (the outer process), the judges, the runner. All ran as the program's user before: `prlimit` made
# the worker's /proc walk fail (an `error` verdict), SIGSTOP held the call for its whole budget.
ATTACKS = {
    "prlimit every process to no files": "resource.prlimit(pid, resource.RLIMIT_NOFILE, (0, 0))",
    "stop every process": "os.kill(pid, signal.SIGSTOP)",
    "kill every process": "os.kill(pid, signal.SIGKILL)",
}


def attack(kind: str) -> str:
    return (
        "import os, signal, resource\n"
        "for _name in os.listdir('/proc'):\n"
        "    if _name.isdigit() and int(_name) != os.getpid():\n"
        "        pid = int(_name)\n"
        f"        try:\n            {ATTACKS[kind]}\n"
        "        except Exception:\n            pass\n"
    )


# A HumanEval-shaped record (its check runs in the judge), for rlvr/CodeDataset-v0 and
# rlvr/CodeFeedback-v0 (one test: every test held out).
TWICE = {
    "task_id": "Round3/twice",
    "entry_point": "twice",
    "prompt": 'def twice(x: int) -> int:\n    """Return 2 * x."""\n',
    "canonical_solution": "    return 2 * x\n",
    "test": "def check(candidate):\n    for x in range(5):\n        assert candidate(x) == 2 * x\n",
}
# An rlvr-shaped record whose held-out inputs are marked, to find them in any feedback.
HELD = {
    "id": "Round3/held",
    "prompt": "Write `echo(s: str) -> str` returning s unchanged.",
    "entry_point": "echo",
    "reference": "def echo(s):\n    return s\n",
    "tests": [{"fn": "echo", "args": [f"shown-{i}"], "expected": f"shown-{i}"} for i in range(3)],
    "heldout_tests": [{"fn": "echo", "args": [f"HELD-{i}"], "expected": f"HELD-{i}"} for i in range(3)],
}
# An MBPP-shaped record whose checks call builtins the program could define (issue 40.4).
BUILTIN_CALLS = {
    "task_id": 9040,
    "text": "Write a function `power(a, b)` returning a ** b.",
    "code": "def power(a, b):\n    return a ** b\n",
    "test_list": [
        "assert power(2, 10) == pow(2, 10)",
        "assert power(3, 2) == ord(chr(9))",
        "assert power(7, 1) == divmod(15, 8)[1]",
        "assert power(4, 2) == int(hex(16), 16)",
        "assert power(2, 3) == len(list(zip(range(8), range(9))))",
        "assert power(2, 2) == list(reversed([4, 0]))[1]",
        "assert power(2, 5) == int(bin(32), 2)",
        "assert power(1, 5) == pow(1, 5) == chr(49).__len__()",
    ],
}
LIAR = (
    "def power(a, b):\n    return 0\n"
    "def pow(*a):\n    return 0\n"
    "def ord(c):\n    return 0\n"
    "def chr(i):\n    return ''\n"
    "def divmod(a, b):\n    return (0, 0)\n"
    "def hex(i):\n    return '0x0'\n"
    "def bin(i):\n    return '0b0'\n"
    "def zip(*a):\n    return []\n"
    "def reversed(x):\n    return [0, 0]\n"
)


@pytest.fixture(scope="module")
def made(box, tmp_path_factory):
    """The environments, made once: Code-v0 and CodeFeedback-v0 on the built-in tasks, and
    CodeDataset-v0 / CodeFeedback-v0 on the records above."""
    path = tmp_path_factory.mktemp("round3") / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (TWICE, HELD, BUILTIN_CALLS)))
    out = {
        "code": gym.make("rlvr/Code-v0", timeout_s=2.0, sandbox=box).unwrapped,
        "fraction": gym.make("rlvr/Code-v0", scoring="fraction", timeout_s=2.0, sandbox=box).unwrapped,
        "dataset": gym.make("rlvr/CodeDataset-v0", path=str(path), scoring="fraction", sandbox=box).unwrapped,
        "feedback": gym.make("rlvr/CodeFeedback-v0", source=str(path), sandbox=box).unwrapped,
    }
    yield out
    for env in out.values():
        env.close()


def play(env, task_id: str, program: str):
    """One step of `program` on `task_id`: (reward, verdict, reply text, seconds)."""
    env.reset(options={"task_id": task_id})
    start = time.monotonic()
    reply, reward, _, _, info = env.step(fenced(program))
    return reward, info["verdict"], "\n".join(m["content"] for m in reply), time.monotonic() - start


def assert_zero(verdict, reward, what) -> None:
    statuses = [t["status"] for t in verdict.info["tests"]]
    assert reward == 0.0 and verdict.outcome is Outcome.INCORRECT, (what, verdict.outcome, verdict.detail)
    assert statuses and statuses[0] in FAILED and set(statuses) <= FAILED | {"skipped"}, (what, statuses)


@pytest.mark.parametrize("kind", sorted(ATTACKS))
def test_a_program_cannot_signal_stop_or_limit_the_harness(box, made, kind):
    """Every test shape in one call (stdin, call, converted and judged asserts), then a HumanEval
    record and a CodeFeedback episode: each attack's wrong answers score 0, typed, in seconds."""
    program = attack(kind) + (
        "def add(a, b):\n    return a - b\ndef twice(x):\n    return x\nif __name__ == '__main__':\n    print(0)\n"
    )
    tests = [
        code.IOTest("1 2\n", "3\n"),
        code.CallTest("add", (1, 2), 3),
        code.AssertTest("assert add(1, 2) == 3"),
        code.AssertTest("for i in range(3):\n    assert add(i, 1) == i + 1\n"),
    ]
    start = time.monotonic()
    verdict = code.verify(fenced(program), tests, box, scoring="fraction")
    assert_zero(verdict, verdict.score, kind)
    assert all(t["status"] == "wrong_answer" for t in verdict.info["tests"]), verdict.info["tests"]
    assert time.monotonic() - start < 5
    for env in ("dataset", "feedback"):
        reward, verdict, _, seconds = play(made[env], "Round3/twice", program)
        assert_zero(verdict, reward, (kind, env))
        assert seconds < 5, (kind, env, seconds)


# ---- 2. a wrong answer is cheap to judge ---------------------------------------------------------
SLOW_WRONG = {  # a wrong answer after most of each test's 2 s: the call stops at the first one
    "sum_numbers": "import time\ntime.sleep(0.8)\nprint(-1)\n",
    "topo_order": "import time\ndef topo_order(n, edges):\n    time.sleep(0.8)\n    return [-1]\n",
    "lis_length": "import time\ndef lis_length(nums):\n    time.sleep(0.8)\n    return -1\n",
}


def test_a_slow_wrong_answer_stops_the_verification_at_its_first_wrong_value(made):
    """stdin/stdout, call and converted-assert tasks (4-5 tests of 2 s each): judged at the
    first test, well under two tests' time."""
    for task_id, program in SLOW_WRONG.items():
        reward, verdict, _, seconds = play(made["code"], task_id, program)
        statuses = [t["status"] for t in verdict.info["tests"]]
        assert_zero(verdict, reward, task_id)
        assert statuses[0] == "wrong_answer" and set(statuses[1:]) == {"skipped"}, (task_id, statuses)
        assert seconds < 2.5, (task_id, seconds)


def test_verification_and_episode_time_are_capped_whatever_the_number_of_tests(box, tmp_path):
    slow = "import time\ndef add(a, b):\n    time.sleep(0.5)\n    return a + b\n"
    tests = [code.CallTest("add", (i, 1), i + 1) for i in range(12)]
    settings = code.RunSettings(timeout_s=2.0, fail_fast=False, max_wall_s=1.2)
    start = time.monotonic()
    verdict = code.verify(fenced(slow), tests, box, scoring="fraction", settings=settings)
    statuses = [t["status"] for t in verdict.info["tests"]]
    assert time.monotonic() - start < 2.5 and verdict.outcome is Outcome.INCORRECT
    assert statuses[0] == "passed" and statuses[-1] == "timeout" and set(statuses) == {"passed", "timeout"}
    assert "time budget" in verdict.info["tests"][-1]["detail"]
    # An episode's attempts share one budget: a slow program is out of time after its first attempt.
    path = tmp_path / "slow.jsonl"
    record = {"id": "slow_add", "prompt": "Write `add(a, b)`.", "entry_point": "add"}
    record["tests"] = [{"fn": "add", "args": [i, 1], "expected": i + 1} for i in range(12)]
    path.write_text(json.dumps(record) + "\n")
    env = gym.make("rlvr/CodeFeedback-v0", source=str(path), sandbox=box, timeout_s=2.0, max_episode_s=1.5).unwrapped
    try:
        env.reset(options={"task_id": "slow_add"})
        start = time.monotonic()
        _, reward, terminated, _, info = env.step(fenced(slow.replace("a + b", "a + b + 1")))
        assert terminated and reward == 0.0 and info["verdict"].outcome is Outcome.INCORRECT, info["verdict"]
        assert time.monotonic() - start < 3.0
    finally:
        env.close()


# ---- 3. text from the sandbox never breaks a log or a prompt -------------------------------------
def test_a_file_name_in_invalid_utf8_breaks_neither_the_episode_log_nor_the_feedback(box, made, tmp_path):
    """A name in invalid UTF-8 left in /tmp reaches the run's detail (the note on the replaced
    container) escaped to valid text; the episode log writes any string; a CodeFeedback reply that
    quotes an error message with a lone surrogate is valid text."""
    from rlvr.sandbox.types import Limits

    leave = (
        "import os\nos.close(os.open(b'/tmp/\\xff\\xfe-left', os.O_CREAT | os.O_WRONLY, 0o600))\nraise SystemExit(3)\n"
    )
    result = box.run(files={"p.py": leave}, command=["python3", "p.py"], limits=Limits())
    assert result.exit_code == 3 and "\\udcff\\udcfe-left" in result.detail, result
    result.detail.encode("utf-8")
    log = tmp_path / "episodes.jsonl"
    episode_log.append_records(log, [{"detail": "x\udcff " + result.detail}])
    assert json.loads(log.read_bytes().decode("utf-8"))["detail"].startswith("x\udcff")
    program = "def echo(s):\n    raise ValueError('\\udcff' + s)\n"
    _, verdict, reply, _ = play(made["feedback"], "Round3/held", program)
    assert verdict.outcome is Outcome.INCORRECT and "runtime error" in reply, reply
    reply.encode("utf-8")


# ---- 5. held-out inputs are out of a shown test's reach ------------------------------------------
# The function walks up its stack to the harness worker's spec (every test's inputs, in the frames
# it was forked from) and raises what it finds: the feedback quotes a shown test's error message.
LEAK = (
    "import sys\n"
    "def echo(s):\n"
    "    found, f = [], sys._getframe()\n"
    "    while f is not None:\n"
    "        for v in list(f.f_locals.values()):\n"
    "            if isinstance(v, dict) and isinstance(v.get('tests'), list):\n"
    "                found += [str(t.get('calls')) for t in v['tests'] if isinstance(t, dict)]\n"
    "        f = f.f_back\n"
    "    raise ValueError('LEAKED ' + ' '.join(found))\n"
)


def test_a_shown_test_cannot_reach_the_held_out_inputs(made):
    _, verdict, reply, _ = play(made["feedback"], "Round3/held", LEAK)
    assert verdict.outcome is Outcome.INCORRECT and "LEAKED" in reply and "shown-" in reply, reply  # the walk works
    assert "HELD-" not in reply, reply


# ---- 4. converted asserts call only the program's own functions ----------------------------------
def test_converted_asserts_never_call_the_program_for_a_builtin(made):
    env = made["dataset"]
    reward, verdict, _, _ = play(env, "9040", LIAR)
    assert_zero(verdict, reward, "builtins supplied by the program")
    env.reset(options={"task_id": "9040"})
    _, reward, _, _, info = env.step(env.get_task("9040").reference)
    assert reward == 1.0, info["verdict"].detail


# ---- 6. built-in tests compare whole values -----------------------------------------------------
def test_a_fake_large_list_fails_the_built_in_large_input_test(made):
    fake = (
        "def primes_up_to(n):\n"
        "    if n == 10**6:\n        return [0] * 78497 + [999983]\n"
        "    return [p for p in range(2, n + 1) if all(p % d for d in range(2, int(p ** 0.5) + 1))]\n"
    )
    reward, verdict, _, _ = play(made["fraction"], "primes_up_to", fake)
    statuses = [t["status"] for t in verdict.info["tests"]]
    assert reward < 1.0 and statuses[3] == "wrong_answer", statuses
    made["fraction"].reset(options={"task_id": "primes_up_to"})
    _, reward, _, _, info = made["fraction"].step(made["fraction"].get_task("primes_up_to").reference)
    assert reward == 1.0, info["verdict"].detail
