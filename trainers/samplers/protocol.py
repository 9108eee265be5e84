"""The sampler seam, declared: what a backend is built from, what it must do, and what the `Trainer`
drives.

- `SamplerSpec`: what to start, as plain data, so that `rlvr train`, `rlvr eval` and a Ray rollout
  worker build a backend alike (`trainers.samplers.factory.build_sampler`), the worker in its own process.
- `SamplerBackend`: one engine (vLLM, Hugging Face `generate`, an HTTP server). It meets
  `envs.sampler.Sampler` (and may meet `RequestSampler`), carries the tokenizer whose ids it takes
  and returns, and, to be trained, takes new weights tagged with the policy version (the trainer's
  count of updates) that its samples then carry.
- `TrainerSampler`: what the `Trainer` holds: a local backend wrapped with a clock and the producer's
  weight staging (`trainers.samplers.local.LocalSampler`), or the Ray rollout pool
  (`trainers.samplers.ray_pool.RayRolloutPool`). It rolls out a `RolloutRequest` (`envs.rollout`) itself, so
  the trainer never asks which one it has.

Rule: a backend's own file holds its class and its `build(spec, version, policy)`; the registry
(`trainers.samplers.registry`) names it. Nothing else needs to know it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import Sampler


@dataclass(frozen=True)
class SamplerSpec:
    """What sampler to start. Fields a backend does not use are ignored by it; None leaves a
    setting at the backend's own default."""

    backend: str  # a name in `trainers.samplers.registry.BACKENDS`
    model: str  # a model directory (a LoRA checkpoint: its base, adapter merged), or a server's model name
    tokenizer: str | None = None  # the tokenizer's directory; None: `model`'s
    seed: int = 0
    max_model_len: int | None = None  # None: the model's own context length
    dtype: str | None = None  # the sampling dtype; None: float32
    max_num_seqs: int | None = None  # sequences running at once (vLLM; on CPU it sizes the KV cache)
    seq_tokens: int | None = None  # KV cache per sequence (vLLM on CPU); None: the whole context
    gpu_memory: float | None = None  # share of the GPU the engine takes; None: the engine's default
    chunked_prefill: bool | None = None  # None: the engine's default
    base_url: str | None = None  # a served model (openai, openai-chat)
    api_key: str | None = None


@runtime_checkable
class SamplerBackend(Sampler, Protocol):
    """One sampling engine. `version` is the policy version of the weights it holds (None: not
    tracked, e.g. it samples from the trainer's live model); `max_model_len` its context limit
    (None: none), which rollouts end episodes before; `track_versions`, when the backend can, tags
    each token with the version that sampled it, as weights change between engine steps
    (asynchronous RL: only backends registered with `overlaps` are asked to)."""

    tokenizer: Any
    version: int | None
    max_model_len: int | None
    track_versions: bool

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Load these weights (names as in the Hugging Face checkpoint) as policy `version`."""
        ...

    def close(self) -> None:
        """Free the engine now (a notebook or a test session goes on)."""
        ...


Builder = Callable[[SamplerSpec, int, Any], SamplerBackend]  # (spec, starting version, live policy or None)


@runtime_checkable
class TrainerSampler(Protocol):
    """What the `Trainer` drives, local or on Ray. `seconds`: sampling time since `reset_clock`."""

    seconds: float

    @property
    def version(self) -> int | None:
        """The policy version of the weights it samples with (None: not tracked)."""
        ...

    def rollout(self, request: RolloutRequest) -> list:
        """The request's groups (`envs.rollout.Group`), in seed order."""
        ...

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Load the weights now (synchronous RL, and at the start)."""
        ...

    def stage(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Hand over the weights for the producer to load between engine steps (asynchronous RL)."""
        ...

    def start_producing(self, stop_requested: Callable[[], bool]) -> None:
        """A producer thread drives the sampler from now on; `stop_requested()` true ends a rollout."""
        ...

    def stop_producing(self) -> None:
        """The producer has stopped: drop whatever a rollout it left part-way holds in the engine."""
        ...

    def reset_clock(self) -> None: ...

    def close(self) -> None: ...
