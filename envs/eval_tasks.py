"""Which tasks an evaluation visits, in which order: every listed problem once, or reset seeds.

An environment whose `task_ids()` lists its problems (a dataset, a benchmark: `TextEnv.task_ids`)
is evaluated on problems `start`, `start + 1`, ... of that list, each exactly once per sample, in
the list's order: a benchmark score is then over the benchmark, not over a random multiset of it
(drawing by seed visits 164 HumanEval problems as about 105 distinct ones). `count` None means all
of them from `start`; a count past the end stops at the end (`note` says so). An environment
without a list (generated tasks) is evaluated on the reset seeds `start`, `start + 1`, ...,
by default the held-out seeds training never draws (`envs.seeds`).

Pure bookkeeping: `rlvr eval` and the Python API's `evaluate` plan with it and hand each chunk's
slice to `rollout` (a `RolloutRequest`'s `seeds`, or its `task_ids`), so both visit the same tasks in
the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlvr.envs.core import EnvError
from rlvr.envs.seeds import HELD_OUT_SEED_START

DEFAULT_TASKS = 100  # tasks of an environment without a list, when no count is given
MAX_CHUNK = 32  # tasks one rollout call batches at most, by default
CHUNK_PARTS = 4  # a smaller evaluation is cut into about this many chunks, so that a stop keeps most of it


def default_chunk(count: int) -> int:
    """Tasks per rollout call when none is asked for: 32, or a quarter of the tasks when that is
    fewer (a batch of 32 tasks costs a sampler little more per task than a larger one; below it a
    quarter of a small evaluation is seconds of sampling). A task's samples depend on its chunk (its
    seed is counted from the chunk's first task), so `rlvr eval` and the API's `evaluate` share this."""
    return max(1, min(MAX_CHUNK, -(-count // CHUNK_PARTS)))


class EvalTasksError(EnvError, ValueError):
    """The tasks asked for do not exist (a start past the end of the list, or below 0)."""


@dataclass(frozen=True)
class EvalTasks:
    """`count` tasks from `start`: indices into `problems` (the env's whole list, in order), or,
    when `problems` is None, reset seeds. `asked`: the count requested (None: all / the default)."""

    count: int
    start: int
    problems: tuple[str, ...] | None = None
    asked: int | None = None

    @property
    def listed(self) -> bool:
        return self.problems is not None

    def rollout_tasks(self, lo: int, hi: int) -> dict[str, Any]:
        """The run's tasks [lo, hi) as a `RolloutRequest`'s task fields: their reset seeds, or their ids
        (and no seeds)."""
        if not 0 <= lo <= hi <= self.count:
            raise ValueError(f"tasks [{lo}, {hi}) are outside this run's {self.count}")
        if self.problems is None:
            return {"seeds": [self.start + i for i in range(lo, hi)]}
        return {"seeds": (), "task_ids": list(self.problems[self.start + lo : self.start + hi])}

    def describe(self) -> str | None:
        """ "164 of 164 problems" for a listed env; None for seeds."""
        if self.problems is None:
            return None
        return f"{self.count} of {len(self.problems)} problems"

    @property
    def note(self) -> str | None:
        """A line for the user when the count asked for went past the end of the list; else None."""
        if self.problems is None or self.asked is None or self.asked <= self.count:
            return None
        return (
            f"note: the environment lists {len(self.problems)} problems; from problem {self.start} there are "
            f"{self.count}, so {self.count} are evaluated (not {self.asked}), each once"
        )


def plan(env: Any, tasks: int | None = None, start: int | None = None) -> EvalTasks:
    """The tasks an evaluation of `env` (a `TextEnv`, or a Gymnasium wrapper of one) visits.
    `tasks`: how many (None: every listed problem, else `DEFAULT_TASKS`); `start`: the first
    problem's index in the list, or the first reset seed (None: 0, or `HELD_OUT_SEED_START`)."""
    if tasks is not None and tasks < 1:
        raise ValueError(f"tasks must be >= 1 or None, got {tasks}")
    if start is not None and start < 0:
        raise EvalTasksError(f"the first task must be >= 0, got {start}")
    listing = getattr(getattr(env, "unwrapped", env), "task_ids", None)
    ids = listing() if callable(listing) else None
    if ids is None:
        return EvalTasks(DEFAULT_TASKS if tasks is None else tasks, HELD_OUT_SEED_START if start is None else start)
    problems = tuple(str(i) for i in ids)
    if len(set(problems)) != len(problems):
        raise EvalTasksError(f"{type(getattr(env, 'unwrapped', env)).__name__}.task_ids() repeats an id")
    start = 0 if start is None else start
    if start >= len(problems):
        raise EvalTasksError(
            f"the environment lists {len(problems)} problems (0..{len(problems) - 1}): none from problem {start}"
        )
    left = len(problems) - start
    return EvalTasks(left if tasks is None else min(tasks, left), start, problems, tasks)
