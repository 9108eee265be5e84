"""The lockstep schedule (any `Sampler`): each turn is ONE `sampler.generate` call for every active
episode, then every episode's environment steps (in the thread pool, since a step may wait on a
sandbox or a verifier); the next turn waits for the slowest. The first turn asks for `n=G` samples
of each task's prompt (a group shares it), later turns `n=1` per episode."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from rlvr.envs.rollout.episode_run import EpisodeRun, take_turn
from rlvr.envs.rollout.opening import by_env, open_leaders
from rlvr.envs.rollout.plan import RolloutPlan
from rlvr.envs.rollout.sampler_calls import checked_generate, seeded
from rlvr.envs.sampler import Sampler


def play_lockstep(plan: RolloutPlan, pool: Executor, bar: Any, sampler: Sampler) -> list[list[EpisodeRun]]:
    """Reset the groups and play every episode to its end, one sampler call per turn."""
    leaders, pending = open_leaders(plan, pool)
    # Turn 1: one call on the groups' shared prompts, n = G each.
    live = [r for r in leaders if not r.done]
    first = seeded(plan.sampling, 0)
    samples = checked_generate(sampler, [r.prompt_ids for r in live], plan.group_size, first) if live else []
    groups = [[leader] + copies() for leader, copies in zip(leaders, pending)]
    pairs = [(r, s) for g, ss in zip([g for g in groups if not g[0].done], samples) for r, s in zip(g, ss)]
    turn = 0
    while pairs:
        list(pool.map(lambda batch: [take_turn(r, s, plan.tokenizer, plan.limit) for r, s in batch], by_env(pairs)))
        turn += 1
        bar.update(sum(r.done for r, _ in pairs))
        bar.set_postfix(turn=turn)
        # Later turns: one call on every active episode's context, n = 1 each.
        active = [r for g in groups for r in g if not r.done]
        contexts = [r.context_ids() for r in active]
        samples = checked_generate(sampler, contexts, 1, seeded(plan.sampling, turn)) if active else []
        pairs = [(r, ss[0]) for r, ss in zip(active, samples)]
    bar.update(bar.total - bar.n)
    return groups
