"""LoRA (peft): the policy trains a low-rank adapter, its base weights stay frozen.

- `wrap`: the base model with a fresh adapter (`get_peft_model`), or the adapter of a checkpoint
  (resume). The adapter config records the base model ("tiny" or its absolute path), so a
  checkpoint (adapter_model.safetensors + adapter_config.json) says what it adapts.
- `adapter_off`: the reference model of KL is the base, i.e. the policy with its adapter
  disabled: no second copy of the model in memory.
- `merged_weights`: what the vLLM sampler loads after each step: W + scale * B @ A for each
  adapted module, under the base model's names, computed on the side (the trained model is never
  merged). Faster than vLLM's own LoRA path here (benchmarks/lora_sync.py).
- `check_targets`: a module name that is not in the model fails at `rlvr train`'s check, from the
  model's config alone (a model on the meta device: no weights are read).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

ADAPTER = "default"  # peft's name of the one adapter
# ADAPTER_CONFIG (the adapter directory's file) is trainers.models': models must not import lora (a circle)
ALL_LINEAR = "all-linear"


def targets(spec: str) -> str | list[str]:
    """peft's `target_modules` from the `lora_targets` setting."""
    spec = spec.strip()
    return ALL_LINEAR if spec == ALL_LINEAR else [t.strip() for t in spec.split(",")]


def lora_config(rank: int, alpha: float | None, target_spec: str, base: str) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=rank,
        lora_alpha=alpha if alpha is not None else 2 * rank,
        lora_dropout=0.0,
        target_modules=targets(target_spec),
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base,
    )


def base_reference(path: Path) -> str:
    """How an adapter names its base: "tiny" for the built-in model (the checkout may move), else
    the absolute path."""
    from rlvr.trainers.models import TINY, TINY_DIR

    return TINY if Path(path).resolve() == TINY_DIR.resolve() else str(Path(path).resolve())


def wrap(
    model: nn.Module, base_path: Path, rank: int, alpha: float | None, target_spec: str, adapter_dir: Path | None = None
) -> nn.Module:
    """`model` (the base) with a trainable adapter: fresh, or loaded from `adapter_dir` (resume).
    Only the adapter's parameters require grad."""
    from peft import PeftModel, get_peft_model

    if adapter_dir is not None:
        policy = PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=True)
    else:
        # peft names the base from the model itself (its path); set below to `base_reference`
        policy = get_peft_model(model, lora_config(rank, alpha, target_spec, None))
    policy.peft_config[ADAPTER].base_model_name_or_path = base_reference(base_path)
    return policy.eval()  # dropout off, see trainers.loop


def is_lora(model: nn.Module) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


@contextlib.contextmanager
def adapter_off(policy: nn.Module) -> Iterator[nn.Module]:
    """The base model: `policy` with its adapter disabled while in the block."""
    with policy.disable_adapter():
        yield policy


@torch.no_grad()
def merged_weights(policy: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Base-model names and weights with the adapter folded in: W + scale * B @ A for each adapted
    module. Only the blocks that hold an adapted module (e.g. `self_attn`, `mlp`) are given, each
    whole: vLLM fuses q/k/v and gate/up into one layer, and a layer it gets only part of would be
    left half-loaded. Embeddings, norms and an unadapted lm_head never change."""
    from peft.tuners.lora import LoraLayer

    base = policy.get_base_model()
    layers = {n: m for n, m in base.named_modules() if isinstance(m, LoraLayer)}
    seen: set[str] = set()
    for block in sorted({n.rpartition(".")[0] for n in layers}):
        parent = base.get_submodule(block) if block else base
        for name, p in parent.named_parameters(prefix=block):
            if ".lora_" in name:
                continue
            name = name.replace(".base_layer.", ".")
            if name in seen:
                continue
            seen.add(name)
            module_name, _, kind = name.rpartition(".")
            layer = layers.get(module_name)
            if layer is not None and kind == "weight":
                p = (p.float() + layer.get_delta_weight(ADAPTER).float()).to(p.dtype)
            yield name, p.detach()


def save(policy: nn.Module, directory: Path) -> None:
    """The adapter alone. Embeddings are never saved with it (peft's "auto" would look the base up,
    on the Hub if it is not a local path: rlvr never goes online)."""
    policy.save_pretrained(directory, safe_serialization=True, save_embedding_layers=False)


def check_targets(model_path: Path, target_spec: str) -> None:
    """Every named target is a module of the model (built on the meta device from its config:
    nothing is read but config.json). Raises `ConfigError` naming the missing ones."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from rlvr.trainers.config import ConfigError
    from rlvr.trainers.models import adapter_base_dir, is_adapter_dir

    spec = targets(target_spec)
    if spec == ALL_LINEAR:
        return
    if is_adapter_dir(model_path):
        model_path = adapter_base_dir(model_path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_path, local_files_only=True))
    names = [n for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Embedding)) and n]
    # peft's rule: a target matches a module whose name is it or ends with "." + it
    missing = [t for t in spec if not any(n == t or n.endswith("." + t) for n in names)]
    linear = sorted({n.rpartition(".")[2] for n in names})
    if missing:
        raise ConfigError(
            f"lora_targets: no module named {', '.join(missing)} in the model; its linear and "
            f"embedding modules are: {', '.join(linear)} (or use all-linear)"
        )
