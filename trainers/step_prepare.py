"""Between sampling and the update: a step's batch made ready to train on. Old and reference
logprobs, the sampler/trainer gap (checked against its bound), values and advantages, each phase
returning its result (frozen); none changes a batch in place (`trainers.phases`)."""

from __future__ import annotations

import dataclasses

import torch

from rlvr.trainers.algorithms import AlgoConfig
from rlvr.trainers.batch import collate
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.dispatch import filter_loss_mask, shape_rewards
from rlvr.trainers.kernels.rollout_correction import staleness_stats
from rlvr.trainers.model_set import Models
from rlvr.trainers.phases import PreUpdateSums, StepTensors, compute_advantages, old_and_ref_logprobs, per_micro_batch
from rlvr.trainers.policy import forward
from rlvr.trainers.step_rollout import Rollout
from rlvr.trainers.weight_sync import SyncCheck, sync_gap


@torch.no_grad()
def prepare(
    models: Models, algo: AlgoConfig, cfg: TrainConfig, sync_check: SyncCheck, version: int, step: int, rollout: Rollout
) -> StepTensors:
    """Step `step` (1-based) of a policy at `version` updates: its rollout's tensors, with advantages."""
    collated = collate(rollout.episodes, models.pad_token_id)
    # the length penalty sees what the model generated; the filter then drops truncated rows
    rewards_B, turn_rewards_BT = shape_rewards(algo, collated.rewards, collated.turn_rewards, collated.loss_mask)
    batch = dataclasses.replace(
        collated,
        rewards=rewards_B,
        turn_rewards=turn_rewards_BT,
        loss_mask=filter_loss_mask(algo, collated.loss_mask, collated.truncated),
    )
    sync_check.check_versions(batch.versions, batch.loss_mask, version, step=step)
    stats = (
        {} if batch.versions is None else staleness_stats(batch.versions, batch.loss_mask, version, cfg.max_staleness)
    )
    if algo.overlong_buffer_frac > 0:
        stats["overlong_penalty_mean"] = float((rewards_B - collated.rewards).mean())
    t = old_and_ref_logprobs(models, algo, cfg, batch).with_stats(stats)  # and values
    if t.old_logprobs_BT is not None:  # else the update's own forward measures it, before its optimizer step
        gap = sync_gap(t.old_logprobs_BT, batch.sampler_logprobs, batch.loss_mask, batch.versions, version)
        sync_check.check_gap(gap, version, step=step)
        t = t.with_stats(gap.metrics())
    if models.critic is not None:
        (values_BT,) = per_micro_batch(
            t.batch, cfg.micro_batch, lambda mb: (models.critic(mb),), cfg.micro_batch_tokens
        )
        t = dataclasses.replace(t, old_values_BT=values_BT)
    return t.with_advantages(compute_advantages(algo, t))


@torch.no_grad()
def check_without_update(
    policy: torch.nn.Module, cfg: TrainConfig, sync_check: SyncCheck, version: int, step: int, t: StepTensors
) -> dict[str, float]:
    """A step without signal, of an algorithm whose update's own forward measures the sampler/trainer
    gap: that forward without gradients, so that the weight sync is still checked every step and
    the gap, entropy and KL logged. Other algorithms measured them in `prepare`."""
    if t.old_logprobs_BT is not None:
        return {}
    batch = t.batch

    def logprobs_and_entropy(mb):
        out = forward(policy, mb, cfg.temperature, with_entropy=True)
        return out.logprobs, out.entropy

    old_BT, entropy_BT = per_micro_batch(batch, cfg.micro_batch, logprobs_and_entropy, cfg.micro_batch_tokens)
    sums = PreUpdateSums()
    sums.add(old_BT, entropy_BT, batch, t.ref_logprobs_BT)
    gap = sync_gap(old_BT, batch.sampler_logprobs, batch.loss_mask, batch.versions, version)
    sync_check.check_gap(gap, version, step=step)
    return {**sums.stats(), **gap.metrics()}
