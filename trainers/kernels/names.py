"""The names the kernels take, kept apart from the kernels: a leaf without torch, so that the algorithm
presets (`trainers.algorithms`, which `trainers.config` reads for `--algo`'s description) check a
name without loading torch. Each kernel checks its own argument against the same tuple."""

from __future__ import annotations

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm")  # aggregation
LOSS_TYPES = ("clipped", "cispo", "pg")  # policy_loss: clipped_policy_loss, cispo_loss, pg_loss
RATIO_LEVELS = ("token", "sequence")  # policy_loss: the clipped loss's ratio (sequence: GSPO)
KL_ESTIMATORS = ("k1", "k2", "k3")  # kl
