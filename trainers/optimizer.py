"""The trainer's optimizer: AdamW over the policy's trainable parameters (LoRA: the adapter's) and,
in a second group with its own learning rate, the value head's or critic's."""

from __future__ import annotations

import functools
import math

import torch

from rlvr.trainers.config import TrainConfig
from rlvr.trainers.model_set import Models
from rlvr.trainers.precision import adamw


def build_optimizer(config: TrainConfig, models: Models) -> torch.optim.Optimizer:
    groups = [{"params": [p for p in models.policy.parameters() if p.requires_grad], "lr": config.lr}]
    value_params = list(models.value_head.parameters()) if models.value_head is not None else []
    value_params += list(models.critic.parameters()) if models.critic is not None else []
    if value_params:
        groups.append({"params": value_params, "lr": config.value_lr or config.lr})
    # float32 master weights when the model is bf16 (`trainers.precision`)
    return adamw(groups, lr=config.lr, betas=config.adam_betas, weight_decay=config.weight_decay)


def lr_factor(config: TrainConfig, update: int) -> float:
    """The learning rate's multiplier after `update` optimizer updates: a linear warm-up over
    `warmup_steps`, then constant, linear to 0 or cosine to 0 at `steps`."""
    if update < config.warmup_steps:
        return (update + 1) / config.warmup_steps
    progress = (update - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    if config.lr_schedule == "linear":
        return max(0.0, 1.0 - progress)
    if config.lr_schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return 1.0


def build_scheduler(config: TrainConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, functools.partial(lr_factor, config))
