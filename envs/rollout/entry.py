"""`rollout`, the one entry: a `RolloutRequest` played by a sampler, returned as `Group`s.

It checks the request (a bad env id or argument fails at once, typed), hands an agent environment
(`EnvKind.AGENT`, `envs.agent.env.AgentEnv`) the whole call, since the agent program drives the calls
rather than a turn loop, and otherwise opens the environments (`opening`) and plays the episodes on
one of two schedules, the same episodes either way: per episode when the sampler takes requests one
at a time (`per_episode`), else in lockstep (`lockstep`)."""

from __future__ import annotations

import contextlib
import dataclasses
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import gymnasium as gym
from tqdm.auto import tqdm

from rlvr.envs.core import EnvKind
from rlvr.envs.registry import make
from rlvr.envs.rollout.episodes import to_episode
from rlvr.envs.rollout.group import Group
from rlvr.envs.rollout.lockstep import play_lockstep
from rlvr.envs.rollout.per_episode import PerEpisodeSchedule
from rlvr.envs.rollout.plan import RolloutPlan
from rlvr.envs.rollout.request import RolloutRequest
from rlvr.envs.sampler import RequestSampler, Sampler, Tokenizer

ENV_THREADS = 64  # a call's own pool: many threads, since an environment step mostly waits


def rollout(
    request: RolloutRequest,
    sampler: Sampler,
    tokenizer: Tokenizer,
    *,
    per_episode: bool | None = None,
    executor: Executor | None = None,
    progress: bool = True,
) -> list[Group]:
    """The request's groups: G = `request.group_size` episodes for each of its tasks, in order, sampled
    by `sampler` on prompts that `tokenizer`'s chat template renders. `request.max_length` None: the
    sampler's `max_model_len`, if it has one. `per_episode`: advance each episode on its own (needs a
    `RequestSampler`) or all in lockstep; None: per episode whenever the sampler can. The environment
    steps run on `executor`'s threads (a step mostly waits: on a sandbox, a verifier's process, a
    remote tool); None: a pool of `ENV_THREADS` for this call. A caller that rolls out again and again
    passes its own, since starting threads on every call costs more than a rollout of short
    completions spends on its environments. `progress`: a progress bar on stderr."""
    max_length = request.max_length
    if max_length is None:  # a sampler that knows its context limit (VLLMSampler) sets it
        max_length = getattr(sampler, "max_model_len", None)
    request = dataclasses.replace(
        request, env_args=dict(request.env_args or {}), model_info=dict(request.model_info or {}), max_length=max_length
    )
    env_kwargs = request.env_args
    probe = make(request.env, disable_env_checker=True, **env_kwargs)  # a bad id or argument fails here, typed
    spec_id = probe.spec.id
    if getattr(probe.unwrapped, "kind", None) == EnvKind.AGENT:  # an agent program plays it (envs.agent.env)
        try:
            return probe.unwrapped.play(request, sampler, tokenizer)
        finally:
            probe.close()
    probe.close()

    opened: list[Any] = []

    def make_env():
        env = gym.make(spec_id, disable_env_checker=True, **env_kwargs)
        opened.append(env)
        return env

    if per_episode is None:
        per_episode = isinstance(sampler, RequestSampler)
    elif per_episode and not isinstance(sampler, RequestSampler):
        raise TypeError(
            f"per-episode rollouts need a RequestSampler (submit, poll, unfinished); "
            f"{type(sampler).__name__} has only generate"
        )
    sampling = request.sampling
    plan = RolloutPlan(
        make_env=make_env,
        starts=request.starts(),
        tokenizer=tokenizer,
        group_size=request.group_size,
        sampling=sampling,
        limit=None if max_length is None else max_length - sampling.max_tokens,
        group_id_start=request.group_id_start,
    )
    try:
        with (
            contextlib.nullcontext(executor) if executor is not None else ThreadPoolExecutor(ENV_THREADS) as pool,
            tqdm(total=len(plan.starts) * plan.group_size, disable=not progress, desc=request.env, unit="ep") as bar,
        ):
            if per_episode:
                groups = PerEpisodeSchedule(plan, pool, bar, sampler).play()
            else:
                groups = play_lockstep(plan, pool, bar, sampler)
        settings = dataclasses.asdict(sampling)  # once: asdict is slow, and every episode records it
        return [
            Group(g[0].task_id, request.group_id_start + i, [to_episode(r, request, settings) for r in g])
            for i, g in enumerate(groups)
        ]
    finally:
        for env in opened:
            env.close()
