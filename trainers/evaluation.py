"""Evaluation, one module for the three places that evaluate: the Trainer's held-out accuracy
(before, during and after training), the Python API's `evaluate` and `rlvr eval`.

- `rollout_chunk`: tasks [start, stop) of an evaluation as ONE rollout call, seeded by the chunk
  rule (`chunk_sampling`), so that the API and the command give the same episodes for the same
  settings, and a resumed `rlvr eval` samples a chunk again as the uninterrupted run sampled it.
- `held_out_tasks`, `held_out_results`, `check_held_out`: the Trainer's evaluation on its split's
  held-out tasks (`envs.held_out`), one sample each, and what an evaluation of errors alone means."""

from __future__ import annotations

import dataclasses
from typing import Any

from rlvr.envs.eval_tasks import EvalTasks
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers.outage import NothingProduced, all_errors, error_message
from rlvr.verifiers.verdict import Outcome


def chunk_sampling(sampling: SamplingSettings, start: int, group_size: int) -> SamplingSettings:
    """The sampling of a chunk whose first task is the evaluation's `start`-th. The rollout adds i * G
    to the seed for the i-th task of a call, so task t's seed is seed + t * G in any run, whatever its
    chunks."""
    return dataclasses.replace(sampling, seed=sampling.seed + start * group_size)


def rollout_chunk(
    env_id: str,
    env_args: dict[str, Any] | None,
    sampler: Any,
    tokenizer: Any,
    tasks: EvalTasks,
    chunk: tuple[int, int],
    group_size: int,
    sampling: SamplingSettings,
    model: str,
) -> list:
    """Tasks [start, stop) of an evaluation (`tasks`: by id from the env's list, or by reset seed) as
    groups whose ids are their indices: one rollout call, the chunk's whole batch."""
    start, stop = chunk
    return rollout(
        RolloutRequest(
            env_id,
            env_args or {},
            group_size=group_size,
            sampling=chunk_sampling(sampling, start, group_size),
            model_info={"model": model, "model_step": None},
            group_id_start=start,
            **tasks.rollout_tasks(start, stop),
        ),
        sampler,
        tokenizer,
        progress=False,
    )


def held_out_tasks(plan: EvalTasks, n: int | None) -> tuple[dict[str, list], int]:
    """The first `n` (None: all) held-out tasks of `plan` as rollout tasks (`{"task_ids": ...}` of a
    listed split, else `{"seeds": ...}`), and how many."""
    if plan.listed:
        n = min(n or plan.count, plan.count)
        return plan.rollout_tasks(0, n), n
    n = n or plan.count
    return {"seeds": list(range(plan.start, plan.start + n))}, n


def held_out_results(every: list, tasks: dict[str, list], n: int) -> dict[str, Any]:
    """Accuracy and mean reward over `every` episode of a held-out evaluation (one sample of each of
    its `n` tasks; an agent episode once), errors left out and counted."""
    episodes = [ep for ep in every if not ep.is_error]
    k = max(len(episodes), 1)
    results = {
        "accuracy": sum(ep.outcome is Outcome.CORRECT for ep in episodes) / k,
        "reward_mean": sum(ep.reward for ep in episodes) / k,
        "tasks": n,
        "errors": len(every) - len(episodes),
    }
    if "task_ids" in tasks:  # which rows: a user (and a test) can see that none was trained on
        results["task_ids"] = tasks["task_ids"]
    if all_errors(every):
        results["first_error"] = error_message(every[0])
    return results


def check_held_out(results: dict[str, Any], step: int) -> str | None:
    """An evaluation whose every episode was an error measured nothing: before training (step 0) the
    environment cannot work and every step would fail alike (`NothingProduced`); later, a warning."""
    if results.get("first_error") is None:
        return None
    text = (
        f"the held-out evaluation at step {step}: every one of its {results['tasks']} episodes was an "
        f"error. The first: {results['first_error']}"
    )
    if step == 0:
        raise NothingProduced(text)
    return f"warning: {text}"
