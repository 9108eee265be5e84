"""rlvr/Code-v0: the shipped task set, every reference passing and every wrong solution failing in
the real sandbox, the env contract (envs.check_env), and pickling."""

from __future__ import annotations

import pickle
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr import envs
from rlvr.envs.tasks.code import CodeEnv, TaskRecordError, builtin_records, task_from_record
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require


def test_task_set_is_graded_and_complete():
    env = CodeEnv()
    assert len(env.tasks) >= 30
    levels = Counter(t.metadata["difficulty"] for t in env.tasks)
    assert set(levels) == {1, 2, 3} and min(levels.values()) >= 10
    kinds = Counter(test.kind for t in env.tasks for test in t.answer)
    assert min(kinds[k] for k in ("io", "call", "assert")) >= 20
    for task in env.tasks:
        assert len(task.answer) >= 3, task.task_id
        assert task.reference.startswith("```python\n") and task.wrong != task.reference
        entry = task.metadata["entry_point"]
        if entry:  # function tasks: the statement names the function, the tests call it
            assert f"`{entry}(" in task.prompt[0]["content"], task.task_id
            assert all(t.kind != "io" for t in task.answer), task.task_id
        else:
            assert all(t.kind == "io" for t in task.answer), task.task_id
    assert len(CodeEnv(difficulty=1).tasks) == levels[1]
    assert len(CodeEnv(difficulty=[2, 3]).tasks) == levels[2] + levels[3]


def test_every_reference_passes_and_every_wrong_solution_fails(box):
    env = CodeEnv(sandbox=box)
    jobs = [(task, which) for task in env.tasks for which in ("reference", "wrong")]
    # One sandbox call per solution (all its tests at once), many solutions in parallel.
    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(lambda job: env.verify(job[0], getattr(job[0], job[1])), jobs))
    problems = [
        f"{task.task_id} {which}: {v.outcome} {v.detail}"
        for (task, which), v in zip(jobs, verdicts)
        if v.outcome is not (Outcome.CORRECT if which == "reference" else Outcome.INCORRECT)
    ]
    assert not problems, "\n".join(problems)


def test_single_step_contract_with_worked_task(box):
    env = envs.make("rlvr/Code-v0")
    obs, info = env.reset(options={"task_id": "fizzbuzz"})
    assert info["task_id"] == "fizzbuzz" and obs[0]["role"] == "user"
    assert "standard input" in obs[0]["content"] and "```python" in obs[0]["content"]
    program = (
        "n = int(input())\nfor i in range(1, n + 1):\n"
        "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)"
    )
    reply, reward, terminated, truncated, info = env.step(f"```python\n{program}\n```")
    assert (reply, reward, terminated, truncated) == ([], 1.0, True, False)
    # All of the task's tests: its 3 `tests` and its 6 `heldout_tests` (this env shows no feedback).
    assert info["verdict"].outcome is Outcome.CORRECT and info["verdict"].info["passed"] == 9
    env.reset(options={"task_id": "fizzbuzz"})
    _, reward, _, _, info = env.step("I am not sure.")
    assert reward == 0.0 and info["verdict"].outcome is Outcome.FORMAT_ERROR


def test_fraction_scoring_gives_partial_credit(box):
    env = CodeEnv(scoring="fraction", sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    # Wrong for the centuries 1900 (of 4 tests) and 2100, 1800 (of 6 held-out tests): 7 of 10.
    _, reward, _, _, info = env.step("```python\ny = int(input())\nprint('YES' if y % 4 == 0 else 'NO')\n```")
    assert reward == pytest.approx(0.7) and info["verdict"].outcome is Outcome.INCORRECT


def test_check_env_passes(box):
    check_env = getattr(envs, "check_env", None)
    require(check_env is not None, "rlvr.envs.check_env is not available yet")
    check_env(envs.make("rlvr/Code-v0"), seeds=(0, 1))


def test_pickle_drops_the_sandbox_and_still_steps(box):
    env = CodeEnv(sandbox=box)
    env.reset(seed=3)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.sandbox is None and env.sandbox is box
    _, reward, _, _, info = clone.step(clone.reference_action())  # uses sandbox.shared_sandbox()
    assert reward == 1.0, info["verdict"].detail


def test_bad_arguments_and_records_raise_typed_errors():
    with pytest.raises(ValueError, match="difficulty"):
        CodeEnv(difficulty=7)
    with pytest.raises(ValueError, match="scoring"):
        CodeEnv(scoring="best")
    with pytest.raises(envs.TaskNotFoundError):
        CodeEnv().reset(options={"task_id": "no-such-task"})
    with pytest.raises(TaskRecordError, match="lacks"):
        task_from_record({"id": "x", "prompt": "p"})
    with pytest.raises(TaskRecordError, match="test 0"):
        task_from_record({"id": "x", "prompt": "p", "tests": [{"fn": "f"}]})
    assert len(builtin_records()) == len(CodeEnv().tasks)
    with pytest.raises(TaskRecordError, match="test 0"):
        task_from_record({"id": "x", "prompt": "p", "tests": [{"stdin": "", "stdout": ""}], "heldout_tests": [{}]})


def test_heldout_tests_join_the_answer():
    task = task_from_record(
        {
            "id": "x",
            "prompt": "p",
            "tests": [{"stdin": "1", "stdout": "1"}],
            "heldout_tests": [{"stdin": "2", "stdout": "2"}, {"stdin": "3", "stdout": "3"}],
        }
    )
    assert [t.stdin for t in task.answer] == ["1", "2", "3"] and task.metadata["n_heldout"] == 2
    plain = task_from_record({"id": "y", "prompt": "p", "tests": [{"stdin": "", "stdout": ""}]})
    assert plain.metadata["n_heldout"] == 0
    for record in builtin_records():  # every shipped task holds out six generated tests
        assert len(record["heldout_tests"]) == 6, record["id"]
        assert all(("fn" in t) != ("stdin" in t) for t in record["heldout_tests"]), record["id"]
