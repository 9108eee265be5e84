"""The fixed values a training setting may take: `TrainConfig`'s choices (`setting(..., choices=...)`,
checked by `validate` and shown in `rlvr train --help`'s usage) and the device pattern. A leaf apart
from the settings themselves, so that a module that checks one of these values (`trainers.device`)
needs only the table; the sampler backends' names come from their registry."""

from __future__ import annotations

import re

from rlvr.trainers.samplers.registry import TRAINING_BACKENDS

SAMPLERS = TRAINING_BACKENDS  # vllm, hf
OLD_LOGPROBS = ("auto", "recompute", "sampler")
CORRECTIONS = ("token_tis", "sequence_tis", "token_mask", "sequence_mask")  # trainers.kernels.rollout_correction
VALUE_MODELS = ("auto", "none", "head", "critic")
SCHEDULES = ("constant", "linear", "cosine")
DTYPES = ("float32", "bfloat16")
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")  # `device` (trainers.device), checked without importing torch
DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
