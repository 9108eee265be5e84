"""The feedback forge: a policy that never computes anything, only replays what
`rlvr/CodeFeedback-v0`'s feedback showed it, must score what a stub scores. Attempt 1 is a stub;
each later attempt is a lookup table of every input the feedback quoted so far (parsed from the
reply text, as a policy would read it) mapped to the expected value quoted, with the stub's answer
for any other input. The reward is computed on held-out tests the feedback never quotes, so the
table earns nothing there. Real environments through `gymnasium.make`, the real Docker sandbox."""

from __future__ import annotations

import ast
import io
import json
import tokenize
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs.tasks.code import builtin_tasks, fenced
from rlvr.verifiers.code import CallTest, IOTest
from rlvr.verifiers.verdict import Outcome

ENV_ID = "rlvr/CodeFeedback-v0"
# One task per line of the file below: an example in the statement (`1 2`), four more tests.
IO_TASK = {
    "id": "add_io",
    "prompt": "Read two integers and print their sum. Example: input `1 2` prints 3.",
    "reference": "a, b = map(int, input().split())\nprint(a + b)\n",
    "tests": [
        {"stdin": s, "stdout": o}
        for s, o in [("1 2\n", "3\n"), ("4 5\n", "9\n"), ("10 20\n", "30\n"), ("7 8\n", "15\n"), ("100 1\n", "101\n")]
    ],
}
MBPP_TASK = {
    "task_id": "mbpp_mul",
    "text": "Write a function to multiply two integers.",
    "code": "def mul(a, b):\n    return a * b\n",
    "test_list": ["assert mul(2, 3) == 6", "assert mul(4, 5) == 20", "assert mul(-7, 6) == -42"],
}


# --- the policy: read the feedback, write a table ------------------------------------------------


def _strings(text: str, n: int) -> list[str]:
    """The first `n` Python string literals in `text`, as a reader of the reply would take them."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                found.append(ast.literal_eval(tok.string))
                if len(found) == n:
                    break
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return found


def _from_assert(code: str, fn: str) -> tuple[str, str] | None:
    """`assert fn(ARGS) == V` / `is V` / `assert fn(ARGS)` / `assert not fn(ARGS)` -> (args source, value source)."""
    try:
        test = ast.parse(code).body[0]
    except (SyntaxError, IndexError):
        return None
    if not isinstance(test, ast.Assert):
        return None
    node, value = test.test, "True"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node, value = node.operand, "False"
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.Is)):
        node, value = node.left, ast.unparse(node.comparators[0])
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == fn):
        return None
    return "[" + ", ".join(ast.unparse(a) for a in node.args) + "]", value


def learn(table: dict, feedback: str, fn: str | None) -> None:
    """Add every (input, expected) pair the reply quotes to the table."""
    for line in feedback.splitlines():
        if not line.startswith("- test ") or "): " not in line:
            continue
        rest = line.split("): ", 1)[1]
        if rest.startswith("input "):
            pair = _strings(rest[len("input ") :], 2)
            if len(pair) == 2:
                table[" ".join(pair[0].split())] = pair[1]
        elif fn and rest.startswith("AssertionError: line ") and ": " in rest[len("AssertionError: line ") :]:
            learned = _from_assert(rest[len("AssertionError: line ") :].split(": ", 1)[1], fn)
            if learned:
                table[learned[0]] = learned[1]
        elif fn and rest.startswith(f"{fn}(") and ": expected " in rest and ", got " in rest:
            call, after = rest.split(": expected ", 1)
            try:
                args = json.loads("[" + call[len(fn) + 1 : -1] + "]")
                expected = json.loads(after.rsplit(", got ", 1)[0])
            except ValueError:
                continue  # a quote cut short: nothing to learn from it
            table[repr(args)] = repr(expected)


def stub(fn: str | None) -> str:
    return f"def {fn}(*args, **kwargs):\n    return None\n" if fn else "pass\n"


def table_program(table: dict, fn: str | None) -> str:
    if not fn:  # stdin task: print the quoted output for a quoted input, nothing otherwise
        return f"import sys\n_T = {table!r}\nsys.stdout.write(_T.get(' '.join(sys.stdin.read().split()), ''))\n"
    lines = ["import json", "def _k(args):", "    return json.dumps(list(args), sort_keys=True)", "_T = {}"]
    lines += [f"_T[_k({args})] = {value}" for args, value in table.items()]
    lines += [f"def {fn}(*args):", "    return _T.get(_k(args))"]
    return "\n".join(lines) + "\n"


def play(box, task_id: str, policy: str, source: str = "builtin") -> dict[str, Any]:
    """One episode at the defaults. `policy`: "stub" (a stub every attempt), "table" (the lookup
    table) or "reference" (the task's reference solution)."""
    env = gym.make(ENV_ID, source=source, sandbox=box).unwrapped
    env.reset(options={"task_id": task_id})
    fn = env.task.metadata.get("entry_point")
    table: dict = {}
    feedback: list[str] = []
    while True:
        if policy == "reference":
            action = env.task.reference
        else:
            action = fenced(table_program(table, fn) if policy == "table" and feedback else stub(fn))
        reply, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            env.close()
            return {"reward": reward, "verdict": info["verdict"], "feedback": feedback, "table": table}
        feedback.append(reply[0]["content"])
        learn(table, reply[0]["content"], fn)


def _rendered_inputs(test) -> list[str]:
    """How a feedback line would quote the test's input (see verifiers.code.compare)."""
    if isinstance(test, IOTest):
        return [f"input {test.stdin!r}"[:60]]
    if isinstance(test, CallTest):
        return [f"{test.fn}({', '.join(json.dumps(a) for a in test.args)})"[:60]]
    return [line.strip()[:60] for line in test.code.splitlines() if line.strip()]


# --- the tests -----------------------------------------------------------------------------------


def test_a_feedback_lookup_table_scores_like_a_stub(box):
    tasks = builtin_tasks()
    assert len(tasks) == 35
    jobs = [(t.task_id, p) for t in tasks for p in ("stub", "table", "reference")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(jobs, pool.map(lambda job: play(box, *job), jobs)))
    mean = {
        p: sum(results[(t.task_id, p)]["reward"] for t in tasks) / len(tasks) for p in ("stub", "table", "reference")
    }
    print(
        f"\nmean final reward over the 35 built-in tasks at the defaults: stub {mean['stub']:.3f}, "
        f"lookup table {mean['table']:.3f}, reference {mean['reference']:.3f}"
    )
    assert mean["reference"] == 1.0, [t.task_id for t in tasks if results[(t.task_id, "reference")]["reward"] != 1.0]
    assert mean["table"] <= mean["stub"] + 0.05, [t.task_id for t in tasks if results[(t.task_id, "table")]["reward"]]
    # The table is a real attack: it learned what the feedback quoted and passes the shown tests it was
    # shown (before the split it ended 32 of the 35 tasks with reward 1.0).
    learned = [t.task_id for t in tasks if results[(t.task_id, "table")]["table"]]
    passes_shown = [
        t.task_id
        for t in tasks
        if (s := results[(t.task_id, "table")]["verdict"].info["shown"])["passed"] == s["total"]
    ]
    print(f"the lookup table's last attempt passes every shown test of {len(passes_shown)} of 35 tasks")
    assert len(learned) == 35 and len(passes_shown) >= 30, (learned, passes_shown)
    # No feedback message quotes a held-out input.
    env = gym.make(ENV_ID).unwrapped
    leaks = []
    for task in tasks:
        text = "\n".join(m for p in ("stub", "table") for m in results[(task.task_id, p)]["feedback"])
        assert text, task.task_id
        for test in env.splits[task.task_id].heldout:
            leaks += [(task.task_id, r) for r in _rendered_inputs(test) if r in text]
    assert not leaks, leaks


def test_a_jsonl_task_splits_as_documented(box, tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(IO_TASK) + "\n" + json.dumps(MBPP_TASK) + "\n")
    env = gym.make(ENV_ID, source=str(path), sandbox=box).unwrapped
    # add_io: `1 2` is in the statement (shown); of the other four, `4 5` and `10 20` shown, the rest held out.
    split = env.splits["add_io"]
    assert [t.stdin for t in split.shown] == ["1 2\n", "4 5\n", "10 20\n"]
    assert [t.stdin for t in split.heldout] == ["7 8\n", "100 1\n"]
    # mbpp_mul: its first assert is quoted in the prompt; of the other two, one is shown and one held out.
    assert [t.code for t in env.splits["mbpp_mul"].heldout] == ["assert mul(-7, 6) == -42"]
    for task_id, n_shown in (("add_io", 3), ("mbpp_mul", 2)):
        table = play(box, task_id, "table", source=str(path))
        assert table["reward"] == 0.0 and table["verdict"].outcome is Outcome.INCORRECT, task_id
        assert table["verdict"].info["shown"] == {**table["verdict"].info["shown"], "passed": n_shown}, task_id
        text = "\n".join(table["feedback"])
        assert "7 8" not in text and "100 1" not in text and "-42" not in text, text
        assert play(box, task_id, "reference", source=str(path))["reward"] == 1.0, task_id
