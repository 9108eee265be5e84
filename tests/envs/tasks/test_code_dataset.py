"""rlvr/CodeDataset-v0: local JSONL in the MBPP, HumanEval, APPS, CodeContests and rlvr shapes."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr import envs
from rlvr.envs.tasks.code import TaskRecordError
from rlvr.envs.tasks.code_dataset import CodeDatasetEnv, load_dataset
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require

MBPP = {
    "task_id": 901,
    "text": "Write a function to return the elements common to two lists, sorted ascending.",
    "code": "def common_sorted(a, b):\r\n    return sorted(set(a) & set(b))",
    "test_list": [
        "assert common_sorted([3, 4, 5, 6], [5, 7, 4, 10]) == [4, 5]",
        "assert common_sorted([1, 2], [3]) == []",
    ],
    "test_setup_code": "",
    "challenge_test_list": ["assert common_sorted([2, 2, 1], [2, 1, 1]) == [1, 2]"],
}
HUMANEVAL = {
    "task_id": "Demo/0",
    "entry_point": "count_upper",
    "prompt": 'def count_upper(s: str) -> int:\n    """Return how many upper-case letters s has.\n'
    '    >>> count_upper("aBC")\n    2\n    """\n',
    "canonical_solution": "    return sum(1 for c in s if c.isupper())\n",
    "test": "def check(candidate):\n    assert candidate('aBC') == 2\n    assert candidate('') == 0\n"
    "    assert candidate('ABCdefG') == 4\n",
}
APPS_IO = {
    "problem_id": 77,
    "question": "Read two integers a and b and print a * b.",
    "input_output": json.dumps({"inputs": ["2 3\n", "-4 5\n"], "outputs": ["6\n", "-20\n"]}),
    "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a * b)\n"]),
}
APPS_CALL = {
    "problem_id": 78,
    "question": "Write a function `largest(xs)` returning the largest number in xs.",
    # APPS wraps call-based outputs in a list; both [9] and 9 must be accepted as 9.
    "input_output": {"fn_name": "largest", "inputs": [[[1, 9, 3]], [[-2, -7]]], "outputs": [[9], -2]},
    "solutions": json.dumps(["def largest(xs):\n    return max(xs)\n"]),
}
CODECONTESTS = {
    "name": "demo_sum_of_squares",
    "description": "Given n, print 1^2 + 2^2 + ... + n^2.",
    "public_tests": {"input": ["3\n"], "output": ["14\n"]},
    "private_tests": {"input": ["1\n", "10\n"], "output": ["1\n", "385\n"]},
    "generated_tests": {"input": ["100\n"], "output": ["338350\n"]},
    "solutions": {
        "language": [2, 3],
        "solution": ["int main() {}", "n = int(input())\nprint(n * (n + 1) * (2 * n + 1) // 6)"],
    },
    "incorrect_solutions": {"language": [3], "solution": ["n = int(input())\nprint(sum(i * i for i in range(n)))"]},
}
RLVR = {
    "id": "mine/double",
    "prompt": "Write `double(x)` returning 2 * x.",
    "entry_point": "double",
    "tests": [{"fn": "double", "args": [4], "expected": 8}, {"assert": "assert double(-1) == -2"}],
    "reference": "def double(x):\n    return 2 * x\n",
    "wrong": "def double(x):\n    return x + 2\n",
}
RECORDS = [MBPP, HUMANEVAL, APPS_IO, APPS_CALL, CODECONTESTS, RLVR]


@pytest.fixture()
def dataset(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n\n")
    return path


def test_every_shape_is_read(dataset):
    tasks = {t.task_id: t for t in load_dataset(dataset)}
    assert list(tasks) == ["901", "Demo/0", "77", "78", "demo_sum_of_squares", "mine/double"]
    mbpp = tasks["901"]
    assert mbpp.metadata["entry_point"] == "common_sorted" and len(mbpp.answer) == 2
    assert "assert common_sorted([3, 4, 5, 6]" in mbpp.prompt[0]["content"]
    assert [t.kind for t in tasks["Demo/0"].answer] == ["assert"]
    assert tasks["Demo/0"].answer[0].code.rstrip().endswith("check(count_upper)")
    assert "def count_upper(s: str) -> int:" in tasks["Demo/0"].prompt[0]["content"]
    assert [(t.stdin, t.expected_stdout) for t in tasks["77"].answer] == [("2 3\n", "6\n"), ("-4 5\n", "-20\n")]
    assert tasks["78"].metadata["entry_point"] == "largest" and len(tasks["78"].answer) == 2
    contest = tasks["demo_sum_of_squares"]
    assert len(contest.answer) == 3 and "n * (n + 1)" in contest.reference and "range(n)" in contest.wrong
    assert len(load_dataset(dataset, generated_tests=True)[4].answer) == 4
    assert len(load_dataset(dataset, challenge_tests=True)[0].answer) == 3
    assert all(len(t.answer) <= 1 for t in load_dataset(dataset, max_tests=1))


def test_references_pass_and_wrong_answers_fail_in_the_sandbox(dataset, box):
    env = CodeDatasetEnv(str(dataset), sandbox=box)
    jobs = [(task, which) for task in env.tasks for which in ("reference", "wrong")]
    with ThreadPoolExecutor(max_workers=6) as pool:
        verdicts = list(pool.map(lambda job: env.verify(job[0], getattr(job[0], job[1])), jobs))
    for (task, which), verdict in zip(jobs, verdicts):
        want = Outcome.CORRECT if which == "reference" else Outcome.INCORRECT
        assert verdict.outcome is want, (task.task_id, which, verdict.detail)
        # every shape is judged out of the program's reach (on the host, or by the harness's judge)
        assert verdict.info["trust"] == "isolated", (task.task_id, which)


def test_apps_call_outputs_accept_the_wrapped_and_bare_value(dataset, box):
    env = CodeDatasetEnv(str(dataset), sandbox=box, scoring="fraction")
    env.reset(options={"task_id": "78"})
    _, reward, _, _, info = env.step("```python\ndef largest(xs):\n    return [max(xs)]\n```")
    # [9] == outputs[0] passes; [-2] is neither -2 nor a one-element wrap of it: 1 of 2.
    assert reward == pytest.approx(0.5), info["verdict"].detail


def test_check_env_passes(dataset, box):
    check_env = getattr(envs, "check_env", None)
    require(check_env is not None, "rlvr.envs.check_env is not available yet")
    check_env(envs.make("rlvr/CodeDataset-v0", path=str(dataset)), seeds=(0, 1))


def test_bad_files_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such dataset"):
        CodeDatasetEnv(str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(RLVR) + "\n{not json\n")
    with pytest.raises(TaskRecordError, match=r"bad.jsonl:2: not JSON"):
        CodeDatasetEnv(str(bad))
    bad.write_text(json.dumps({"title": "no tests here"}) + "\n")
    with pytest.raises(TaskRecordError, match="unknown task shape"):
        CodeDatasetEnv(str(bad))
    bad.write_text(json.dumps({**APPS_IO, "input_output": "{broken"}) + "\n")
    with pytest.raises(TaskRecordError, match="input_output is not valid JSON"):
        CodeDatasetEnv(str(bad))
    with pytest.raises(ValueError, match="max_tests"):
        CodeDatasetEnv(str(tmp_path / "missing.jsonl"), max_tests=0)
