"""Which tasks an evaluation visits (`envs.eval_tasks.plan`): every problem of a listed env once, in its
order, or the reset seeds of a generated one; and which built-in envs list their problems."""

from __future__ import annotations

import json

import pytest

from rlvr import envs
from rlvr.envs.eval_tasks import DEFAULT_TASKS, EvalTasksError, plan
from rlvr.envs.seeds import HELD_OUT_SEED_START


@pytest.fixture()
def five(tmp_path):
    path = tmp_path / "five.jsonl"
    path.write_text("".join(json.dumps({"question": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(5)))
    return envs.make("rlvr/MathDataset-v0", path=str(path))


def test_a_listed_env_is_visited_once_per_problem_in_order(five):
    every = plan(five)
    assert (every.count, every.start, every.listed, every.note) == (5, 0, True, None)
    assert every.describe() == "5 of 5 problems"
    assert every.rollout_tasks(0, 2) == {"seeds": (), "task_ids": ["0", "1"]} and every.rollout_tasks(2, 5) == {
        "seeds": (),
        "task_ids": ["2", "3", "4"],
    }
    first = plan(five, tasks=3)
    assert (
        first.rollout_tasks(0, 3) == {"seeds": (), "task_ids": ["0", "1", "2"]}
        and first.describe() == "3 of 5 problems"
    )
    later = plan(five, tasks=10, start=3)  # past the end: the rest, once each, and a note saying so
    assert later.rollout_tasks(0, later.count) == {"seeds": (), "task_ids": ["3", "4"]}
    assert "from problem 3 there are 2, so 2 are evaluated (not 10)" in later.note
    with pytest.raises(EvalTasksError, match=r"lists 5 problems \(0..4\): none from problem 5"):
        plan(five, start=5)
    with pytest.raises(ValueError):
        later.rollout_tasks(0, 3)


def test_a_generated_env_is_evaluated_on_reset_seeds():
    arithmetic = envs.make("rlvr/Arithmetic-v0")
    default = plan(arithmetic)
    assert (default.count, default.start, default.listed, default.describe()) == (
        DEFAULT_TASKS,
        HELD_OUT_SEED_START,
        False,
        None,
    )
    assert plan(arithmetic, tasks=3, start=7).rollout_tasks(1, 3) == {"seeds": [8, 9]}


def test_the_built_in_lists():
    assert len(envs.make("rlvr/Code-v0").unwrapped.task_ids()) == 35
    for generated in ("rlvr/Arithmetic-v0", "rlvr/GuessNumber-v0", "rlvr/SymbolicMath-v0"):
        assert envs.make(generated).unwrapped.task_ids() is None, generated
