"""The tasks of an environment as rows for another trainer: each task's prompt and its `TaskKey`.

Which tasks: an environment that lists its problems (a dataset, a benchmark: `TextEnv.task_ids`) gives
problems `start`, `start + 1`, ... of its list (all of them when `tasks` is None); one that generates its
tasks gives the tasks of reset seeds `start`, `start + 1`, ..., `tasks` of them. From seed 0 these are
training tasks; the seeds from `rlvr.envs.seeds.HELD_OUT_SEED_START` (1,000,000) are those `rlvr train`
and `rlvr eval` hold out, so `start=1_000_000` makes a validation set that a training set from 0 never
overlaps (below 1,000,000 tasks).

Each task is rebuilt from its key before it becomes a row, exactly as the reward will rebuild it, so an
environment that cannot rebuild a task from its id fails here, at export, not in the middle of training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr.envs.adapters.keys import AdapterError, TaskKey, open_env, plain_args, prompt_digest
from rlvr.envs.core import Message, TaskNotFoundError
from rlvr.envs.eval_tasks import EvalTasksError, plan


@dataclass(frozen=True)
class TaskRow:
    """One task: its place in the export (`index`, from 0), its key, and the prompt the model is shown."""

    index: int
    key: TaskKey
    prompt: list[Message]


def task_rows(
    env_id: str, tasks: int | None = None, env_args: Mapping[str, Any] | None = None, start: int = 0
) -> list[TaskRow]:
    """`tasks` tasks of `env_id` (made with `env_args`) from `start`, as rows (see the module docstring).
    `AdapterError` for a multi-turn environment, arguments that are not plain data, `tasks` missing for an
    environment that generates its tasks, or a task the environment cannot rebuild from its id."""
    if tasks is not None and (type(tasks) is not int or tasks < 1):
        raise AdapterError(f"tasks must be a whole number >= 1, got {tasks!r}")
    if type(start) is not int or start < 0:
        raise AdapterError(f"start must be a whole number >= 0, got {start!r}")
    args = plain_args(env_args)
    env = open_env(env_id, args)
    try:
        try:
            chosen = plan(env, tasks, start)
        except EvalTasksError as exc:
            raise AdapterError(f"{env_id}: {exc}") from None
        if not chosen.listed and tasks is None:
            raise AdapterError(f"{env_id} generates its tasks: say how many (tasks=N, --tasks N)")
        version = str(env.unwrapped.version)
        rows = []
        for index in range(chosen.count):
            if chosen.listed:
                prompt, info = env.reset(options={"task_id": chosen.problems[chosen.start + index]})
            else:
                prompt, info = env.reset(seed=chosen.start + index)
            key = TaskKey(env_id, str(info["task_id"]), version, prompt_digest(prompt), args)
            _check_rebuilt(env, key)
            rows.append(TaskRow(index, key, prompt))
        return rows
    finally:
        env.close()


def _check_rebuilt(env, key: TaskKey) -> None:
    """The task `key` names, rebuilt from its id as the reward will, is the one prompted."""
    try:
        prompt, _ = env.reset(options={"task_id": key.task_id})
    except (TaskNotFoundError, NotImplementedError) as exc:
        raise AdapterError(
            f"{key.env_id} cannot rebuild its task {key.task_id!r} from the id (options={{'task_id': ...}}): "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if prompt_digest(prompt) != key.prompt_digest:
        raise AdapterError(
            f"{key.env_id} rebuilds task {key.task_id!r} from its id with another prompt than its reset gave: "
            "its tasks cannot be named by id"
        )
