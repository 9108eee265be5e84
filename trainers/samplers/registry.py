"""The sampler backends by name: the one place a new backend is registered.

Each entry names the backend's builder as "module:function" (imported on first use, so naming a
backend loads no engine), says what the trainer may ask of it, and declares what it holds in memory
(`SamplerMemory`: the run's memory estimate reads it, `trainers.memory_estimate` and
`trainers.memory_plan`). This module imports nothing: settings, flags and checks read the names from
here without loading torch or an engine (`TrainConfig.sampler`'s choices are `TRAINING_BACKENDS`,
`rlvr eval --sampler`'s `SAMPLER_CHOICES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SamplerMemory:
    """What a backend holds in memory beside the trainer's models, as the estimate before a run counts
    it. The defaults are a sampler that runs on the trainer's own policy (hf): no weights of its own,
    a plain KV cache of every episode's whole sequence plus one decoding step's logits, freed before
    the update."""

    gpu_share: bool = False  # on a GPU it takes a share of the device (`vllm_gpu_memory`) for weights and cache
    own_weights: bool = False  # off a GPU it loads its own copy of the policy's weights
    kv_cache: str = ""  # "module:function" sizing the cache it allocates off a GPU (`kv_cache_bytes`'s arguments)
    held_in_update: bool = False  # its memory stays taken while the update runs: counted beside the activations


@dataclass(frozen=True)
class Backend:
    builder: str  # "module:function", a `trainers.samplers.protocol.Builder`
    trains: bool  # takes the trainer's weights (`update_weights`): `rlvr train` may sample with it
    overlaps: bool = False  # loads weights between engine steps, tagging each token's version: asynchronous RL
    needs: str = ""  # what to install when its module cannot be imported
    choice: bool = True  # offered by `--sampler` (openai-chat is chosen by `rlvr eval --api chat` instead)
    memory: SamplerMemory = field(default_factory=SamplerMemory)  # what it holds (a served model's: unused)


BACKENDS: dict[str, Backend] = {
    "vllm": Backend(
        "rlvr.trainers.samplers.vllm_sampler:build",
        trains=True,
        overlaps=True,
        needs="vLLM",
        memory=SamplerMemory(
            gpu_share=True,
            own_weights=True,
            kv_cache="rlvr.trainers.samplers.vllm_sampler:kv_cache_bytes",
            held_in_update=True,
        ),
    ),
    "hf": Backend("rlvr.trainers.samplers.hf_sampler:build", trains=True),
    "openai": Backend("rlvr.trainers.samplers.openai_sampler:build", trains=False),  # a served model, token ids
    "openai-chat": Backend("rlvr.trainers.samplers.chat_sampler:build", trains=False, choice=False),  # text: eval only
}

TRAINING_BACKENDS = tuple(name for name, b in BACKENDS.items() if b.trains and b.choice)
SAMPLER_CHOICES = tuple(name for name, b in BACKENDS.items() if b.choice)
OVERLAPPING_BACKENDS = tuple(name for name, b in BACKENDS.items() if b.overlaps)


def backend(name: str) -> Backend:
    """The entry for `name`; a KeyError naming the known ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise KeyError(f"no sampler backend {name!r}; known: {', '.join(BACKENDS)}") from None


def load(ref: str) -> Any:
    """What a "module:function" reference of an entry names, its module imported now."""
    import importlib  # here: naming a backend imports nothing

    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)
