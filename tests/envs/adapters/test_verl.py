"""The verl adapter: the Parquet file `export` writes has verl's RL data format, read back by pyarrow, and
`compute_score`, loaded from its file and called as verl does (verl itself is not installed), scores the
rows' tasks with the environment's own verifier on worked cases."""

from __future__ import annotations

import importlib.util
import json
import sys

import pyarrow.parquet as pq
import pytest

from rlvr import envs
from rlvr.envs.adapters import verl
from rlvr.envs.adapters.export import ExportError, export
from rlvr.envs.adapters.keys import AdapterError, TaskKey

ARITHMETIC = "rlvr/Arithmetic-v0"
OUTAGE = "tests.run_test_envs:test/GraderOutage-v0"  # every verdict `error` (tests/run_test_envs.py)


def verl_reward_fn(path: str, name: str = "compute_score", reward_kwargs: dict | None = None):
    """What verl's `get_custom_reward_fn` does with `custom_reward_function.path`, `.name` and `.reward_kwargs`:
    the file executed as the module `custom_module`, its function called with the reward kwargs added."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop("custom_module", None)
    raw_fn = getattr(module, name)
    return lambda *args, **kwargs: raw_fn(*args, **kwargs, **dict(reward_kwargs or {}))


def score(fn, row: dict, response: str):
    """One response scored as verl's reward managers call compute_score: keywords, the row's fields."""
    return fn(
        data_source=row["data_source"],
        solution_str=response,
        ground_truth=row["reward_model"]["ground_truth"],
        extra_info=row["extra_info"],
    )


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("verl") / "train.parquet"
    done = export(ARITHMETIC, path, "verl", tasks=4, env_args={"difficulty": 2})
    assert done.rows == 4 and done.path == path
    return pq.read_table(path).to_pylist()


def answer(seed: int) -> str:
    env = envs.make(ARITHMETIC, difficulty=2)
    env.reset(seed=seed)
    return env.unwrapped.task.answer


def test_the_file_has_verls_columns(rows):
    row = rows[1]
    assert list(row) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert row["data_source"] == ARITHMETIC and row["ability"] == "rlvr"
    assert row["prompt"] == envs.make(ARITHMETIC, difficulty=2).reset(seed=1)[0]
    assert row["reward_model"]["style"] == "rule" and row["extra_info"] == {"index": 1, "task_id": "1"}
    key = TaskKey.from_json(row["reward_model"]["ground_truth"])
    assert (key.env_id, key.task_id, key.env_args) == (ARITHMETIC, "1", {"difficulty": 2})


def test_compute_score_on_worked_cases(rows):
    fn = verl_reward_fn(verl.__file__)
    right = answer(0)
    cases = {
        f"\\boxed{{{right}}}": 1.0,  # right
        f"\\boxed{{{int(right) + 1}}}": 0.0,  # wrong
        f"  The answer is \\boxed{{ {right} }}.\n\n": 1.0,  # padded
        f"\\boxed{{{right}.0}}": 1.0,  # the same number
        f"\\boxed{{{right}}} or maybe \\boxed{{{int(right) + 1}}}": 0.0,  # hedged: two different final answers
        f"The answer is {right}. I am not 100% sure.": 0.0,  # doubted: no committed answer
        f"I think it is {right}": 0.0,  # no marked answer
    }
    got = {text: score(fn, rows[0], text) for text in cases}
    assert got == cases and all(type(v) is float for v in got.values())
    assert score(fn, rows[2], f"\\boxed{{{answer(2)}}}") == 1.0  # each row's own task


def test_a_grader_failure_scores_zero_with_a_warning_or_raises(tmp_path):
    path = tmp_path / "outage.parquet"
    export(OUTAGE, path, "verl", tasks=1, env_args={"outage": 10**9, "key": "adapters-verl"})
    row = pq.read_table(path).to_pylist()[0]
    with pytest.warns(RuntimeWarning, match="the grader failed on .* scored 0.0, as verl cannot leave a sample out"):
        assert score(verl_reward_fn(verl.__file__), row, "\\boxed{1}") == 0.0
    with pytest.raises(verl.GraderFailedError, match="the grader is down"):
        score(verl_reward_fn(verl.__file__, reward_kwargs={"on_error": "raise"}), row, "\\boxed{1}")


def test_a_row_rlvr_did_not_make_or_a_changed_task_is_refused(rows):
    with pytest.raises(AdapterError, match="is not an rlvr task key"):
        verl.compute_score("openai/gsm8k", "\\boxed{72}", "72")
    stale = {**json.loads(rows[0]["reward_model"]["ground_truth"]), "env_args": {"difficulty": 3}}
    with pytest.raises(AdapterError, match="is not the task this row was made with"):
        verl.compute_score(ARITHMETIC, "\\boxed{1}", json.dumps(stale))


def test_the_trl_format_reads_back_as_a_dataset(tmp_path):
    import datasets

    path = tmp_path / "trl.parquet"
    export(ARITHMETIC, path, "trl", tasks=2)
    dataset = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "cache"))
    assert dataset.column_names == ["prompt", "rlvr_task"] and len(dataset) == 2
    with pytest.raises(ExportError, match="--format must be one of verl, trl, got 'csv'"):
        export(ARITHMETIC, tmp_path / "x.parquet", "csv", tasks=2)
