"""A run's seeds: every random draw of a step is a function of (seed, step, ...) alone, so that a
resumed run draws what the uninterrupted one drew."""

from __future__ import annotations

import random

import numpy as np
import torch


def mix(*parts: int) -> int:
    """A stable 31-bit seed from integers (numpy's seed sequence mixes them well)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0] & 0x7FFFFFFF)


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's global generators, at the start of a fresh run (the model's
    initialisation draws from torch's)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
