"""The update phase: epochs over shuffled minibatches, one optimizer step per minibatch.

A function of the models, the optimizer and the step's tensors, so that the trainer and each
data-parallel rank (`trainers.ray_trainer`) run the same code. With a `RankGroup` every rank draws
the same minibatches (the shuffle is seeded) and backwards its share of each; the loss
denominators are the whole minibatch's, so the summed gradients equal one process's, and every
rank then takes the same optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from rlvr.trainers.algorithms import AlgoConfig
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.data_parallel import RankGroup
from rlvr.trainers.model_set import Models
from rlvr.trainers.phases import StepTensors, UpdateSums, accumulate_gradients
from rlvr.trainers.weight_sync import SyncGap


def trainable_parameters(models: Models) -> list[torch.nn.Parameter]:
    """Everything the optimizer moves, in a fixed order: the policy's (LoRA: the adapter's) and
    the value head's, then the critic's."""
    params = models.policy_parameters()
    if models.critic is not None:
        params += list(models.critic.parameters())
    return params


def run_update(
    models: Models,
    optimizer: torch.optim.Optimizer,
    algo: AlgoConfig,
    cfg: TrainConfig,
    t: StepTensors,
    shuffle_seed: int,
    group: RankGroup | None = None,
    before_step: Callable[[UpdateSums], None] | None = None,
) -> dict[str, float]:
    """Epochs over minibatches shuffled by `shuffle_seed`; returns the update's metrics, summed
    over every rank's share when `group` is given. `before_step(sums)` runs before each optimizer
    step, its gradients accumulated: it may stop the update there (`trainers.weight_sync`)."""
    epochs = cfg.epochs or algo.ppo_epochs
    n = len(t.batch)
    gen = torch.Generator().manual_seed(shuffle_seed)
    sums = UpdateSums()
    grad_norms = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for rows in torch.tensor_split(order, min(cfg.num_minibatches, n)):
            grad_norms.append(optimizer_step(models, optimizer, algo, cfg, t, rows, sums, group, before_step))
    if group is not None:
        group.sum_update_sums(sums)
    tokens, updates = max(sums.tokens, 1.0), max(len(grad_norms), 1)
    stats = {
        "clip_frac": sums.clipped / tokens,
        "approx_kl": sums.approx_kl / tokens,
        "policy_loss": sums.policy_loss / updates,
        "grad_norm": float(np.mean(grad_norms)),
        "optimizer_steps": len(grad_norms),
    }
    stats.update(sums.pre.stats())  # on-policy: the gap, entropy and KL come from the update's forward
    if sums.pre.batches and sums.pre.tokens:  # on-policy is staleness 0: every token is the checked version's
        stats.update(SyncGap(sums.pre.gap_sum / sums.pre.tokens, int(sums.pre.tokens)).metrics())
    if models.wants_values:
        stats["value_loss"] = sums.value_loss / updates
        stats["value_clip_frac"] = sums.value_clipped / tokens
    return stats


def optimizer_step(
    models: Models,
    optimizer: torch.optim.Optimizer,
    algo: AlgoConfig,
    cfg: TrainConfig,
    t: StepTensors,
    rows: torch.Tensor,
    sums: UpdateSums,
    group: RankGroup | None = None,
    before_step: Callable[[UpdateSums], None] | None = None,
) -> float:
    """One optimizer step on minibatch `rows` (this rank's share of it, with the whole minibatch's
    denominators); returns the gradient norm before clipping."""
    optimizer.zero_grad(set_to_none=True)
    share = rows if group is None else group.share(rows)
    if len(share):  # a minibatch smaller than the ranks leaves some without rows
        accumulate_gradients(models, algo, cfg, t, share, sums, denominator_rows=rows)
    if before_step is not None:
        before_step(sums)
    if group is not None:
        group.sum_gradients(trainable_parameters(models))
    grad_norm = torch.nn.utils.clip_grad_norm_(models.policy_parameters(), cfg.max_grad_norm)
    if models.critic is not None:
        torch.nn.utils.clip_grad_norm_(models.critic.parameters(), cfg.max_grad_norm)
    optimizer.step()
    return float(grad_norm)
