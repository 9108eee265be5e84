"""Samplers (vLLM, Hugging Face, OpenAI-compatible), policy and value models, the RL maths and the
training loop. The only package that imports torch.

The Python API (the README's "Python API" section), each name loaded on first use (PEP 562), so that
`import rlvr.trainers.config` (and the commands' flag generation) imports no torch:

- `TrainConfig`: every setting of a training run (`rlvr train`'s flags are generated from it);
- `Trainer`: `Trainer(config).train()`, quiet unless `config.verbose` (`trainers.api`);
- `evaluate`, `EvalResult`: pass@k of a model or a run's latest checkpoint on an environment, as
  `rlvr eval` measures it (`trainers.api`);
- `build_sampler`, `SamplerSpec`: start a sampler ("hf", "vllm", "openai") for `rlvr.envs.rollout`;
  its `tokenizer` is the one to roll out with, and `close()` frees it.

Loading `Trainer`, `evaluate` or `build_sampler` first applies `trainers.quiet.configure()` (the
libraries' noise off, before torch loads: what `rlvr train` does first); `verbose=True` puts it back.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "TrainConfig": "rlvr.trainers.config",
    "Trainer": "rlvr.trainers.api",
    "evaluate": "rlvr.trainers.api",
    "EvalResult": "rlvr.trainers.api",
    "build_sampler": "rlvr.trainers.samplers.factory",
    "SamplerSpec": "rlvr.trainers.samplers.protocol",
}
_LIGHT = ("TrainConfig", "SamplerSpec")  # a tuple: the import-graph test reads a dict or set as module names

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'rlvr.trainers' has no attribute {name!r}")
    if name not in _LIGHT:
        from rlvr.trainers import quiet

        quiet.configure()  # before torch, transformers and vLLM load, as the commands do
    return getattr(importlib.import_module(_NAMES[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})  # the lazy names too: a notebook's completion offers them
