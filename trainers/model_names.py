"""The names `--model` takes besides a directory, and where the built-in tiny model ships.

"tiny" is the ~1M-parameter model shipped in `trainers/assets/tiny` (built by `trainers.tiny_model`);
"small" is a ~30M-parameter random model built into the cache on first use (`trainers.small_model`,
from the tiny model's tokenizer). A leaf module, importing nothing of rlvr's: `trainers.models`
resolves these names and imports `trainers.small_model` to build "small", so the builder takes its
constants from here rather than from `trainers.models` (which would close an import circle)."""

from __future__ import annotations

from pathlib import Path

TINY = "tiny"
SMALL = "small"  # ~30M parameters, random weights, for benchmarks: trainers.small_model
TINY_DIR = Path(__file__).resolve().parent / "assets" / "tiny"
