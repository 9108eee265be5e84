"""Implementations of `envs.sampler.Sampler`: vLLM (training and evaluation), Hugging Face
`generate` (machines without vLLM), OpenAI-compatible HTTP (a served model: token-id completions,
or chat completions for evaluation only).

Imported lazily: `import trainers.samplers` loads neither vLLM nor transformers."""
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
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'rlvr.trainers.samplers' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
