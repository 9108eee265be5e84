"""An rlvr environment in verl: its tasks in verl's RL data format, and verl's custom reward function.

A row (`verl_record`) has verl's fields: `data_source` (the environment's id, which verl groups its
metrics by), `prompt` (chat messages), `ability` ("rlvr"), `reward_model` (`{"style": "rule",
"ground_truth": KEY}`, KEY the row's `TaskKey` as JSON) and `extra_info` (`{"index": i, "task_id": id}`).
`rlvr export --format verl` writes them to Parquet.

verl loads `compute_score` from this file (`custom_reward_function.path=<this file>` and
`custom_reward_function.name=compute_score`) and calls it once per response with the row's fields. It
rebuilds the task from `ground_truth` and returns the environment's own reward, a float. verl cannot leave
a sample out, so a grader failure (`error`: a sandbox down, a verifier crash) scores 0.0 with a
`RuntimeWarning` naming it; `+custom_reward_function.reward_kwargs.on_error=raise` stops the run instead.
verl hands over the response text only, so a response cut at verl's length limit is graded as text.

This file is loaded by path as verl's `custom_module`: its imports are absolute, and what a caller may
catch (`GraderFailedError`, `AdapterError`) is defined in the modules it imports, the same classes however
this file was loaded.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from rlvr.envs.adapters.keys import TaskKey
from rlvr.envs.adapters.rows import TaskRow
from rlvr.envs.adapters.scoring import GraderFailedError, TaskScorer

ABILITY = "rlvr"
ON_ERROR = ("zero", "raise")

_SCORER = TaskScorer()  # one per process: verl calls compute_score in the process that holds its reward manager


def verl_record(row: TaskRow) -> dict[str, Any]:
    """One row of verl's RL data format for `row`'s task."""
    return {
        "data_source": row.key.env_id,
        "prompt": row.prompt,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": row.key.to_json()},
        "extra_info": {"index": row.index, "task_id": row.key.task_id},
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    on_error: str = "zero",
    **kwargs: Any,
) -> float:
    """verl's custom reward function: the reward of `solution_str` on the task `ground_truth` names, by
    that task's environment. `data_source` and `extra_info` are not needed (the key names the task) and
    other keywords verl may add are ignored. An `error` outcome scores 0.0 with a warning (`on_error="zero"`)
    or raises `GraderFailedError` (`on_error="raise"`); a row rlvr did not make raises `AdapterError`."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
    key = TaskKey.from_json(ground_truth)
    score = _SCORER.score(key, solution_str)
    if score.reward is not None:
        return score.reward
    message = f"rlvr: the grader failed on {key.env_id} task {key.task_id!r} ({score.detail})"
    if on_error == "raise":
        raise GraderFailedError(message)
    warnings.warn(f"{message}; scored 0.0, as verl cannot leave a sample out", RuntimeWarning, stacklevel=2)
    return 0.0
