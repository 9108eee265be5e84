"""The sampler backends, implementations of `envs.sampler.Sampler`: vLLM (training and evaluation),
Hugging Face `generate` (machines without vLLM), OpenAI-compatible HTTP (a served model: token-id
completions, or chat completions for evaluation only); and the seam between them and their users:
the contract (`protocol`), the backends by name (`registry`), the one factory (`factory`), the
trainer's local sampler (`local`) and how the trainer starts its own (`training`).

A new backend is its own file (the class and a `build(spec, version, policy)`) and one line in
`registry.BACKENDS`.

Imported lazily: `import rlvr.trainers.samplers` loads neither vLLM nor transformers."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "VLLMSampler": "rlvr.trainers.samplers.vllm_sampler",
    "HFSampler": "rlvr.trainers.samplers.hf_sampler",
    "HFCopySampler": "rlvr.trainers.samplers.hf_sampler",
    "OpenAISampler": "rlvr.trainers.samplers.openai_sampler",
    "ChatSampler": "rlvr.trainers.samplers.chat_sampler",
    "TextTokenizer": "rlvr.trainers.samplers.chat_sampler",
    "SamplerError": "rlvr.trainers.samplers.openai_sampler",
    "SamplerSpec": "rlvr.trainers.samplers.protocol",
    "SamplerBackend": "rlvr.trainers.samplers.protocol",
    "TrainerSampler": "rlvr.trainers.samplers.protocol",
    "BACKENDS": "rlvr.trainers.samplers.registry",
    "build_sampler": "rlvr.trainers.samplers.factory",
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'rlvr.trainers.samplers' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
