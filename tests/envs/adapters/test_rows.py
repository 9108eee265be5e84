"""Rows for other trainers (`rlvr.envs.adapters.rows`, `keys`): which tasks an environment gives, the key
each row carries, and the environments the adapters refuse, each in one line."""

from __future__ import annotations

import json

import pytest

from rlvr import envs
from rlvr.envs.adapters.keys import AdapterError, TaskKey, plain_args, prompt_digest
from rlvr.envs.adapters.rows import task_rows

ARITHMETIC = "rlvr/Arithmetic-v0"


def test_a_generated_environment_gives_the_tasks_of_consecutive_reset_seeds():
    rows = task_rows(ARITHMETIC, tasks=3, env_args={"difficulty": 1}, start=5)
    env = envs.make(ARITHMETIC, difficulty=1)
    assert [r.index for r in rows] == [0, 1, 2]
    for row, seed in zip(rows, (5, 6, 7)):
        prompt, info = env.reset(seed=seed)
        assert row.prompt == prompt
        assert row.key == TaskKey(ARITHMETIC, str(seed), "0", prompt_digest(prompt), {"difficulty": 1})
        assert row.key.task_id == info["task_id"]


def test_a_listed_environment_gives_its_problems_in_order(tmp_path):
    path = tmp_path / "problems.jsonl"
    lines = [json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) for i in range(4)]
    path.write_text("\n".join(lines) + "\n")
    rows = task_rows("rlvr/MathDataset-v0", env_args={"path": str(path)}, start=1)  # all of them from problem 1
    assert [r.key.task_id for r in rows] == ["1", "2", "3"]
    assert rows[0].prompt[0]["content"].startswith("What is 1 + 1?")
    assert [r.key.task_id for r in task_rows("rlvr/MathDataset-v0", 2, {"path": str(path)})] == ["0", "1"]


def test_a_key_crosses_as_json_and_only_a_key_is_read_back():
    key = task_rows(ARITHMETIC, tasks=1, env_args={"difficulty": 3})[0].key
    assert TaskKey.from_json(key.to_json()) == key
    assert TaskKey.from_json(json.loads(key.to_json())) == key  # the dict a Parquet reader may give
    for bad, problem in [
        ("125", "expected the fields"),
        ("{not json", "is not an rlvr task key"),
        (json.dumps({**json.loads(key.to_json()), "task_id": 7}), "wrong type"),
        (None, "is not an rlvr task key"),
    ]:
        with pytest.raises(AdapterError, match=problem):
            TaskKey.from_json(bad)


@pytest.mark.parametrize(
    "env_id,kwargs,problem",
    [
        ("rlvr/GuessNumber-v0", {"tasks": 2}, "rlvr/GuessNumber-v0 is a multi-turn environment: the TRL and verl "
         "adapters serve single-step environments only"),
        (ARITHMETIC, {}, "generates its tasks: say how many"),
        (ARITHMETIC, {"tasks": 0}, "tasks must be a whole number >= 1, got 0"),
        (ARITHMETIC, {"tasks": 2, "start": -1}, "start must be a whole number >= 0, got -1"),
        (ARITHMETIC, {"tasks": 2, "env_args": {"difficulty": (1,)}}, "must be plain JSON data"),
        (ARITHMETIC, {"tasks": 2, "env_args": {"difficulty": 9}}, "difficulty must be 1..5"),
        ("rlvr/Arithmetc-v0", {"tasks": 2}, "Did you mean 'rlvr/Arithmetic-v0'"),
    ],
)  # fmt: skip
def test_what_the_adapters_refuse_is_one_typed_line(env_id, kwargs, problem):
    with pytest.raises(envs.EnvError) as caught:
        task_rows(env_id, **kwargs)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_plain_args_are_what_json_gives_back():
    assert plain_args(None) == {} and plain_args({"a": [1, {"b": None}]}) == {"a": [1, {"b": None}]}
    with pytest.raises(AdapterError):
        plain_args({"path": object()})
