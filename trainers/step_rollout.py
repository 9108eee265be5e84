"""A step's rollout: which tasks it draws, which groups it keeps, and the metrics of what it sampled.
Functions of their arguments; the Trainer calls `sample_step` with its sampler (`trainers.loop`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlvr.envs.episode import TruncationReason
from rlvr.envs.held_out import TaskSplit
from rlvr.envs.seeds import SEED_SPACE
from rlvr.trainers.algorithms import AlgoConfig
from rlvr.trainers.batch import is_truncated
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.dispatch import keep_groups
from rlvr.trainers.samplers.protocol import TrainerSampler
from rlvr.trainers.seeding import mix
from rlvr.verifiers.verdict import Outcome


@dataclass
class Rollout:
    """What one step sampled: the episodes kept for training plus counts for the metrics."""

    episodes: list
    all_episodes: list  # of every round
    errors: int
    groups_total: int  # the groups a step asks for: the first round's (tasks_per_step)
    groups_kept: int  # the groups trained on (at most groups_total)
    seconds_sampling: float
    seconds_scoring: float
    rounds: int = 1  # sampling rounds: 1 + the refills of dynamic sampling
    groups_sampled: int = 0  # over all rounds


def training_seeds(cfg: TrainConfig, step: int, refill: int = 0) -> list[int]:
    """The step's reset seeds (of its `refill`-th extra round of dynamic sampling): a function of (seed,
    step, refill) alone, so a resumed run draws the same tasks, and never one of the held-out
    evaluation seeds."""
    held_out = cfg.eval_tasks
    rng = np.random.default_rng([cfg.seed, step] + ([refill] if refill else []))  # round 0: as before refills
    seeds = rng.integers(0, SEED_SPACE - held_out, size=cfg.tasks_per_step)
    return [int(s) + held_out if s >= cfg.eval_seed_start else int(s) for s in seeds]


def collect_groups(
    sample_round: Callable[[int], list[list]],
    keep: Callable[[list[list]], list[list]],
    target: int,
    max_extra_rounds: int,
) -> tuple[list[list], list, int]:
    """Sample rounds of groups until `target` groups are kept, at most `1 + max_extra_rounds`
    rounds (DAPO's dynamic sampling, refilled as in its paper and verl's recipe: a shrunken batch
    would weigh the remaining groups differently from step to step). `sample_round(r)` returns
    round r's groups, each a list of episodes; `keep(groups)` returns those to train on, in order.
    Returns the first `target` kept groups, every episode sampled, and the number of rounds."""
    kept: list[list] = []
    every: list = []
    rounds = 0
    while rounds <= max_extra_rounds and len(kept) < target:
        groups = sample_round(rounds)
        rounds += 1
        every += [ep for g in groups for ep in g]
        kept += keep(groups)
    return kept[:target], every, rounds


def trainable_groups(algo: AlgoConfig, groups: list[list]) -> list[list]:
    """The groups to train on, without their error episodes: those with a valid episode, and
    (dynamic sampling) whose rewards differ."""
    valid = [[ep for ep in g if not ep.is_error] for g in groups]
    valid = [g for g in valid if g]
    if not valid:
        return []
    rewards_B = torch.tensor([ep.reward for g in valid for ep in g])
    group_ids_B = torch.tensor([ep.group_id for g in valid for ep in g])
    keep_B = keep_groups(algo, rewards_B, group_ids_B).tolist()
    kept_ids = {g for g, k in zip(group_ids_B.tolist(), keep_B) if k}
    return [g for g in valid if g[0].group_id in kept_ids]


def sample_step(
    cfg: TrainConfig,
    algo: AlgoConfig,
    split: TaskSplit,
    sampler: TrainerSampler,
    roll: Callable[[dict[str, list], int, int], list],
    step: int,
) -> Rollout:
    """Sample `tasks_per_step` groups of `group_size`, score them, and drop what must not train
    (error episodes; with dynamic sampling, groups without signal, refilled from more rounds).
    `roll(tasks, seed, group_id_start)` rolls the run's environment out on `tasks` of `split`'s
    training side with that sampling seed, returning its groups."""
    sampler.reset_clock()
    t0 = time.perf_counter()

    def sample_round(r: int) -> list[list]:
        seed = mix(cfg.seed, step) if r == 0 else mix(cfg.seed, step, 3, r)
        groups = roll(split.training_tasks(training_seeds(cfg, step, r)), seed, r * cfg.tasks_per_step)
        return [g.episodes for g in groups]

    extra = algo.max_refill_rounds if algo.dynamic_sampling else 0
    kept, all_episodes, rounds = collect_groups(
        sample_round, lambda groups: trainable_groups(algo, groups), cfg.tasks_per_step, extra
    )
    total = time.perf_counter() - t0
    return Rollout(
        episodes=[ep for g in kept for ep in g],
        all_episodes=all_episodes,
        errors=sum(ep.is_error for ep in all_episodes if ep.segment == 0),  # an agent episode once
        groups_total=cfg.tasks_per_step,
        groups_kept=len(kept),
        rounds=rounds,
        groups_sampled=len({ep.group_id for ep in all_episodes}),
        seconds_sampling=sampler.seconds,
        seconds_scoring=max(0.0, total - sampler.seconds),
    )


def rollout_metrics(r: Rollout) -> dict[str, Any]:
    """The step's sampling metrics: rewards and outcomes of its valid episodes (an agent episode
    once, whatever its segments), lengths, counts and times."""
    segments = [ep for ep in r.all_episodes if not ep.is_error]
    valid = [ep for ep in segments if ep.segment == 0]
    rewards = np.array([ep.reward for ep in valid], dtype=np.float64)
    lengths = [sum(ep.loss_mask) for ep in segments]
    outcomes = [ep.outcome for ep in valid]
    n = max(len(valid), 1)
    return {
        "reward_mean": float(rewards.mean()) if len(rewards) else 0.0,
        "reward_std": float(rewards.std()) if len(rewards) else 0.0,
        "pass_rate": outcomes.count(Outcome.CORRECT) / n,
        "format_error_rate": outcomes.count(Outcome.FORMAT_ERROR) / n,
        "truncated_rate": sum(is_truncated(ep) for ep in valid) / n,  # budget or context cut
        # outcome `truncated`, by reason: out of turns, context full, max_tokens budget
        **{f"truncated_{reason}_rate": sum(ep.truncation is reason for ep in valid) / n for reason in TruncationReason},
        "response_length": float(np.mean(lengths)) if lengths else 0.0,
        "tokens_generated": int(sum(lengths)),
        "episodes": sum(ep.segment == 0 for ep in r.all_episodes),
        "errors": r.errors,
        "episodes_trained": len(r.episodes),
        "groups_kept": r.groups_kept,
        "groups_total": r.groups_total,
        "sampling_rounds": r.rounds,
        "groups_sampled": r.groups_sampled,
        "time_sampling": r.seconds_sampling,
        "time_scoring": r.seconds_scoring,
    }
