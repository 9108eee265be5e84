"""The `train` extra, checked before `rlvr train` or `rlvr eval` imports any of it.

`pip install rlvr` is the light core: environments, verifiers, the sandbox and the commands built on them
(`rlvr envs`, `check-env`, `sandbox`, `export`), no torch. `pip install 'rlvr[train]'` adds what training and
evaluating a model need (pyproject.toml's `train` extra). Without it, those two commands end in one line that says
which extra to install (`MissingExtraError`, exit code 2 like any other usage error), not in a traceback from deep
inside the trainer's imports."""

from __future__ import annotations

from rlvr.errors import require_extra

# The `train` extra's packages by import name (each one's distribution has the same name), in the order a missing
# one is named: torch first, the one most likely missing. tests/test_packaging.py checks it against pyproject.toml.
TRAIN_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "peft", "matplotlib", "tensorboard", "gguf")


def require_train(command: str) -> None:
    """Raise `MissingExtraError` naming the first package of the `train` extra that is not installed."""
    require_extra(command, "train", {module: module for module in TRAIN_MODULES})
