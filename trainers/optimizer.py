"""The trainer's optimizer: AdamW over the policy's trainable parameters (LoRA: the adapter's) and,
in a second group with its own learning rate, the value head's or critic's."""

from __future__ import annotations

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
