"""How an evaluation samples when no temperature is asked for, and the words that name its sampling.

The convention benchmarks report under (EvalPlus's pass@1, for one): one sample per task is greedy
decoding, the model's likeliest answer, since a sampled answer of a small chat model is often its
tail's noise (issue 43: SmolLM2-135M-Instruct solved 0 of 32 tasks sampled at temperature 1.0, 1 of
32 greedy); pass@k from n > 1 samples needs samples that differ, so it samples. `rlvr eval` and the
Python API's `evaluate` both choose with `temperature_for`, and their summary names what produced
the score (`describe`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GREEDY = 0.0
SAMPLED = 1.0  # the training default (trainers.config.CommonSettings): the distribution the policy learns


def default_temperature(samples_per_task: int) -> float:
    """0 (greedy) for one sample per task, else 1.0."""
    return GREEDY if samples_per_task == 1 else SAMPLED


def temperature_for(asked: float | None, samples_per_task: int) -> float:
    """The temperature asked for, or the default for that many samples per task."""
    return default_temperature(samples_per_task) if asked is None else asked


def describe(sampling: Mapping[str, Any]) -> str:
    """The sampling of a summary, in words: `greedy, up to 32 tokens` or `temperature 1.0, top_p 1.0,
    up to 32 tokens` (top_p means nothing to greedy decoding, so it is left out there)."""
    temperature, top_p = sampling.get("temperature"), sampling.get("top_p", 1.0)
    how = "greedy" if temperature == 0 else f"temperature {float(temperature)}, top_p {float(top_p)}"
    tokens = sampling.get("max_tokens")
    return how if tokens is None else f"{how}, up to {tokens} tokens"
