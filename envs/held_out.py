"""Which tasks a training run trains on and which its held-out evaluation visits: never the same.

- An environment whose tasks are generated (no `task_ids()`): training draws reset seeds, the
  evaluation visits the seeds from `eval_seed_start`, which training never draws (`envs.seeds`).
- An environment that lists its problems (a dataset file, a benchmark), evaluated on another
  environment's rows (`rlvr train --eval-env-arg split=test`, or `path=test.jsonl`): training
  draws from every row of its own list, the evaluation visits the other list's rows in order.
- A listed environment alone (one file): every `HELD_OUT_EVERY`-th row is reserved, positions 0,
  10, 20, ... of the list (a tenth, spread over a file that may be sorted by subject or level).
  The evaluation visits those rows in order, training draws only from the others. Fixed by the
  list alone, so every run on a file holds out the same rows, whatever `--eval-tasks` says.

Without this, a dataset's "held-out" seeds mapped to random rows that training drew too, and a
run reported the accuracy of rows it had trained on (issue 43). Pure bookkeeping: the trainer
builds one `TaskSplit` per run and hands its ids to the rollouts; `describe` is the run's start line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.core import EnvError
from rlvr.envs.eval_tasks import EvalTasks, plan

HELD_OUT_EVERY = 10  # one row in ten, from the first, is held out of a single list
SHOWN_IDS = 4  # ids named in the start line


class HeldOutError(EnvError, ValueError):
    """A listed environment too small to hold rows out, or an evaluation on the training rows."""


@dataclass(frozen=True)
class TaskSplit:
    """`train_ids`: the listed ids training draws from (None: reset seeds). `evaluate`: what the
    held-out evaluation visits (None: no evaluation). `eval_env_args`: the evaluation environment's
    arguments (the training ones when it has none of its own). `reserved`: the rows held out of
    the training list (0 when the evaluation has a list of its own, or none)."""

    train_ids: tuple[str, ...] | None
    evaluate: EvalTasks | None
    eval_env_args: Mapping[str, Any] = field(default_factory=dict)
    separate: bool = False  # the evaluation runs on an environment of its own (eval_env_args)
    reserved: int = 0

    def training_tasks(self, draws: Sequence[int]) -> dict[str, Any]:
        """`rollout`'s task argument for a step: `draws` (integers in [0, 2**31 - 1)) as reset seeds,
        or each as an index into the training ids."""
        if self.train_ids is None:
            return {"seeds": [int(d) for d in draws]}
        return {"task_ids": [self.train_ids[int(d) % len(self.train_ids)] for d in draws]}

    @property
    def note(self) -> str | None:
        """A line when `--eval-tasks` asked for more listed rows than are held out; else None."""
        ev = self.evaluate
        if ev is None or not ev.listed or ev.asked is None or ev.asked <= ev.count:
            return None
        return f"note: {ev.count} rows are held out, so {ev.count} are evaluated (not {ev.asked}), each once"

    def describe(self) -> str | None:
        """The start line's words on the split; None without an evaluation."""
        ev = self.evaluate
        if ev is None:
            return None
        if not ev.listed:
            where = "its own environment (--eval-env-arg)" if self.separate else "training draws none of them"
            return f"held out: reset seeds {ev.start}..{ev.start + ev.count - 1} evaluate ({where})"
        shown = ", ".join(ev.problems[ev.start : ev.start + SHOWN_IDS]) + (", ..." if ev.count > SHOWN_IDS else "")
        trains = "reset seeds" if self.train_ids is None else f"{len(self.train_ids)} rows"
        if self.separate:
            args = " ".join(f"{k}={v}" for k, v in self.eval_env_args.items())
            return (
                f"held out: {ev.count} of the {len(ev.problems)} rows of the evaluation environment ({args}) "
                f"evaluate, ids {shown}; training draws from the {trains} of its own"
            )
        return (
            f"held out: every {HELD_OUT_EVERY}th row of the {self.reserved + len(self.train_ids or ())} listed "
            f"({self.reserved} rows, ids {shown}) evaluate; training draws from the other {trains}"
        )


def reserve(ids: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(training ids, held-out ids) of one list: every `HELD_OUT_EVERY`-th, from the first, held out."""
    held = tuple(str(t) for i, t in enumerate(ids) if i % HELD_OUT_EVERY == 0)
    train = tuple(str(t) for i, t in enumerate(ids) if i % HELD_OUT_EVERY != 0)
    return train, held


def split_tasks(
    env_id: str,
    env_args: Mapping[str, Any],
    eval_env_args: Mapping[str, Any],
    eval_tasks: int,
    eval_seed_start: int,
) -> TaskSplit:
    """The split of a run on `env_id` (see the module docstring). `eval_env_args` override
    `env_args` for the evaluation; empty (or changing nothing): the evaluation's tasks come from
    the training environment. `eval_tasks` 0: no evaluation (a listed environment still trains on
    its training rows only, so that the rows a later evaluation holds out were never trained on)."""
    from rlvr.envs.registry import make

    merged = {**env_args, **eval_env_args}
    separate = merged != dict(env_args)
    train_ids = _listed(make, env_id, env_args)
    if separate:
        eval_ids = _listed(make, env_id, merged) if eval_tasks else None
        if eval_ids is not None and train_ids is not None and tuple(eval_ids) == tuple(train_ids):
            _refuse_same_rows(env_id, eval_env_args, train_ids, make, env_args, merged)
        evaluate = None
        if eval_tasks:
            evaluate = _evaluation(eval_ids, eval_tasks, eval_seed_start)
        return TaskSplit(train_ids, evaluate, dict(eval_env_args), separate=True)
    if train_ids is None:
        evaluate = EvalTasks(eval_tasks, eval_seed_start) if eval_tasks else None
        return TaskSplit(None, evaluate, {})
    if len(train_ids) < 2:
        raise HeldOutError(
            f"{env_id} lists {len(train_ids)} row(s): too few to hold one in {HELD_OUT_EVERY} out for the "
            "held-out evaluation; give it rows of its own with --eval-env-arg (e.g. split=test or path=FILE)"
        )
    train, held = reserve(train_ids)
    evaluate = _evaluation(held, eval_tasks, 0) if eval_tasks else None
    return TaskSplit(train, evaluate, {}, reserved=len(held))


def _listed(make, env_id: str, args: Mapping[str, Any]) -> tuple[str, ...] | None:
    env = make(env_id, disable_env_checker=True, **args)
    try:
        listing = getattr(env.unwrapped, "task_ids", None)
        ids = listing() if callable(listing) else None
        return None if ids is None else tuple(str(i) for i in ids)
    finally:
        env.close()


def _evaluation(ids: tuple[str, ...] | None, count: int, seed_start: int) -> EvalTasks:
    if ids is None:
        return EvalTasks(count, seed_start)
    return plan(_Listed(ids), count, 0)


def _refuse_same_rows(env_id, eval_env_args, train_ids, make, env_args, merged) -> None:
    """Two environments listing the same ids may still hold different rows (a train and a test
    file both numbered 0..n-1): compare the first prompts, and refuse only the same rows."""
    first = [_prompts(make, env_id, a, train_ids[:SHOWN_IDS]) for a in (env_args, merged)]
    if first[0] == first[1]:
        args = " ".join(f"{k}={v}" for k, v in eval_env_args.items())
        raise HeldOutError(
            f"--eval-env-arg {args} gives {env_id} the same rows as training: the evaluation would not be "
            "held out; point it at another split or file"
        )


def _prompts(make, env_id: str, args: Mapping[str, Any], ids: Sequence[str]) -> list:
    env = make(env_id, disable_env_checker=True, **args)
    try:
        return [env.unwrapped.get_task(i).prompt for i in ids]
    finally:
        env.close()


@dataclass(frozen=True)
class _Listed:
    """A list of ids as `envs.eval_tasks.plan` reads an environment's."""

    ids: tuple[str, ...]

    def task_ids(self) -> tuple[str, ...]:
        return self.ids
