"""Each group's environments, reset onto its task: the group's first episode (its leader), then its
other G-1 copies, with the leader's task.

A single-step rlvr env (a contextual bandit) is one env per group, reset onto the group's `Task`
object before each copy's step, the copies stepped one after another; any other env is one env per
episode, its copies reset onto the first's task. Either way each episode sees exactly the env a
fresh reset gives."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from rlvr.envs.chat_template import template_ids
from rlvr.envs.core import EnvError, EnvKind, Task, TextEnv
from rlvr.envs.episode import TruncationReason
from rlvr.envs.rollout.episode_run import EpisodeRun
from rlvr.envs.rollout.plan import RolloutPlan
from rlvr.envs.sampler import Sample
from rlvr.verifiers.verdict import Outcome


def open_run(
    make_env: Callable[[], Any],
    group: int,
    task_id: str | None,
    seed: int | None,
    prompt_ids: list[int],
    task: Task | None = None,
) -> EpisodeRun:
    """A fresh env reset onto a task (the `Task` itself, by id, or drawn by `seed`), with the
    group's prompt (a leader's is rendered after the reset, by `open_leaders`)."""
    env = make_env()
    options = {"task": task} if task is not None else None if task_id is None else {"task_id": task_id}
    messages, info = env.reset(seed=seed, options=options)
    task_id = str(info["task_id"] if "task_id" in info else env.unwrapped.task.task_id)
    tools = getattr(env.unwrapped, "chat_tools", None)
    return EpisodeRun(
        env=env, group=group, task_id=task_id, seed=seed, messages=list(messages), prompt_ids=prompt_ids, tools=tools
    )


def single_step(run: EpisodeRun) -> bool:
    """The run's env is a single-step rlvr env: one env serves its whole group."""
    env = run.env.unwrapped
    return isinstance(env, TextEnv) and env.kind == EnvKind.SINGLE_STEP


def followers(plan: RolloutPlan, leader: EpisodeRun) -> list[EpisodeRun]:
    """The other G-1 copies of a group, with the leader's seed and task. A single-step rlvr env
    is one env for the whole group: each copy resets it onto the leader's `Task` just before its
    step (`reset_first`), so the copies step one after another (`by_env`). Any other env is one
    env per copy, reset now: an rlvr `TextEnv` onto the leader's `Task` object (nothing rebuilt),
    any other env onto its task id."""
    if single_step(leader):
        return [
            EpisodeRun(
                env=leader.env,
                group=leader.group,
                task_id=leader.task_id,
                seed=leader.seed,
                messages=list(leader.messages),
                prompt_ids=leader.prompt_ids,
                outcome=leader.outcome,
                note=leader.note,
                truncation=leader.truncation,
                reset_first=True,
            )
            for _ in range(plan.group_size - 1)
        ]
    env = leader.env.unwrapped
    task = env.task if isinstance(env, TextEnv) else None
    runs = [
        open_run(plan.make_env, leader.group, leader.task_id, leader.seed, leader.prompt_ids, task)
        for _ in range(plan.group_size - 1)
    ]
    if any(r.messages != leader.messages for r in runs):
        raise EnvError(f"copies of task {leader.task_id} reset to different prompts: the env is not deterministic")
    for r in runs:
        r.outcome, r.note, r.truncation = leader.outcome, leader.note, leader.truncation
    return runs


def by_env(pairs: list[tuple[EpisodeRun, Sample]]) -> list[list[tuple[EpisodeRun, Sample]]]:
    """Episodes to step, in batches that may run at once: the copies of a group that share one
    env step one after another, in one batch; every other episode is a batch of its own."""
    batches: dict[int, list[tuple[EpisodeRun, Sample]]] = {}
    for r, sample in pairs:
        batches.setdefault(id(r.env), []).append((r, sample))
    return list(batches.values())


def open_leaders(plan: RolloutPlan, pool: Executor) -> tuple[list[EpisodeRun], list[Callable[[], list[EpisodeRun]]]]:
    """Reset each group's first episode (its leader); return the leaders, and for each group a
    call that gives its other G-1 copies. Only the leader is needed to sample the first turn:
    copies that need envs of their own are reset in the pool meanwhile; those that share the
    leader's single-step env (nothing to reset yet) are made when called. The leaders are reset
    here, one after another: a reset is short Python work, which threads would only slow (the
    GIL). Their prompts are rendered after every reset: alternating resets and templates is slower,
    the two evicting each other from the CPU's caches (benchmarks/README.md, rollout overhead)."""
    leaders = [
        open_run(plan.make_env, plan.group_id_start + i, *start, prompt_ids=[]) for i, start in enumerate(plan.starts)
    ]
    for r in leaders:
        r.prompt_ids = template_ids(plan.tokenizer, r.messages, True, r.tools)
    for r in leaders:
        if plan.limit is not None and len(r.prompt_ids) > plan.limit:
            r.outcome, r.note = Outcome.TRUNCATED, "the prompt does not fit in the context"
            r.truncation = TruncationReason.CONTEXT

    def copies(r: EpisodeRun) -> Callable[[], list[EpisodeRun]]:
        if single_step(r):
            return functools.partial(followers, plan, r)
        return pool.submit(followers, plan, r).result

    return leaders, [copies(r) for r in leaders]
