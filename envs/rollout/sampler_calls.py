"""How a rollout calls its sampler: each turn's sampling settings, seeded apart, and a `generate` whose
answer is checked for its shape. The agent gateway calls the sampler alike (`envs.agent.gateway`,
`envs.agent.engine`).

Seeds: with `sampling.seed` set, turn t samples with seed `sampling.seed + t * TURN_SEED_STRIDE`, spaced
per prompt as the sampler spaces them: turn 0's i-th group gets that plus i*G in both schedules;
a later turn's request gets that plus the episode's index (per episode) or its index among the
turn's active episodes (lockstep)."""

from __future__ import annotations

import dataclasses

from rlvr.envs.sampler import Sample, Sampler, SamplingSettings

TURN_SEED_STRIDE = 1_000_003


def seeded(sampling: SamplingSettings, turn: int) -> SamplingSettings:
    """Turn `turn`'s settings: the seed moved on by `turn` strides (no seed stays none)."""
    if sampling.seed is None:
        return sampling
    return dataclasses.replace(sampling, seed=sampling.seed + turn * TURN_SEED_STRIDE)


def checked_generate(
    sampler: Sampler, prompts: list[list[int]], n: int, sampling: SamplingSettings
) -> list[list[Sample]]:
    """`sampler.generate`, refusing an answer of another shape than `len(prompts)` x `n` samples."""
    out = sampler.generate(prompts, n, sampling)
    if len(out) != len(prompts) or any(len(s) != n for s in out):
        raise RuntimeError(f"the sampler returned {[len(s) for s in out]} samples for {len(prompts)} prompts x {n}")
    return out
