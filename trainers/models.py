"""Where models come from. `resolve_model` turns `--model` into a local directory: "tiny" (also the
default) is the built-in model shipped in `trainers/assets/tiny`, anything else must be a local
Hugging Face model directory. Nothing here downloads: every load is `local_files_only=True`.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from sandbox.errors import RlvrError

TINY = "tiny"
TINY_DIR = Path(__file__).resolve().parent / "assets" / "tiny"


class ModelError(RlvrError):
    """Base class of rlvr's model-loading errors."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """The name is neither "tiny" nor an existing local directory."""


class InvalidModelDirError(ModelError, ValueError):
    """The directory exists but is not a Hugging Face model directory (no config.json)."""


def resolve_model(name_or_path: str | os.PathLike | None = None) -> Path:
    """The local directory of a model: "tiny" or None -> the shipped tiny model, else the path itself."""
    if name_or_path is None or name_or_path == TINY:
        if not (TINY_DIR / "config.json").is_file():
            raise ModelNotFoundError(
                f"the built-in tiny model is missing from {TINY_DIR}; rebuild it with "
                "`python scripts/build_tiny_model.py`"
            )
        return TINY_DIR
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"model must be 'tiny' or a directory path, got {type(name_or_path).__name__}")
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise ModelNotFoundError(
            f"model {str(name_or_path)!r} is not 'tiny' and not a local directory. rlvr never downloads "
            "models: fetch it first (e.g. `hf download NAME --local-dir DIR`) and pass DIR"
        )
    if not path.is_dir():
        raise InvalidModelDirError(f"model path {str(path)!r} is a file; pass the model's directory")
    if not (path / "config.json").is_file():
        raise InvalidModelDirError(f"{str(path)!r} has no config.json: not a Hugging Face model directory")
    return path.resolve()


def load_tokenizer(name_or_path: str | os.PathLike | None = None) -> PreTrainedTokenizerBase:
    """The model's tokenizer, from local files only."""
    return AutoTokenizer.from_pretrained(resolve_model(name_or_path), local_files_only=True)


def load_causal_lm(name_or_path: str | os.PathLike | None = None, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """The causal language model, from local files only, in `dtype` (float32 by default), in eval mode."""
    model = AutoModelForCausalLM.from_pretrained(resolve_model(name_or_path), dtype=dtype, local_files_only=True)
    return model.eval()
