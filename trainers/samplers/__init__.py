"""Implementations of `envs.sampler.Sampler`: vLLM (training and evaluation), Hugging Face
`generate` (machines without vLLM), OpenAI-compatible HTTP (a served model: token-id completions,
or chat completions for evaluation only).

Imported lazily: `import trainers.samplers` loads neither vLLM nor transformers."""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "VLLMSampler": "trainers.samplers.vllm_sampler",
    "HFSampler": "trainers.samplers.hf_sampler",
    "HFCopySampler": "trainers.samplers.hf_sampler",
    "OpenAISampler": "trainers.samplers.openai_sampler",
    "ChatSampler": "trainers.samplers.chat_sampler",
    "TextTokenizer": "trainers.samplers.chat_sampler",
    "SamplerError": "trainers.samplers.openai_sampler",
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'trainers.samplers' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
