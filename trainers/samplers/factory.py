"""`build_sampler`: the one sampler factory, used by `rlvr train` (in its process, and in each Ray
rollout worker's) and by `rlvr eval`. It looks the backend up in the registry and calls its builder."""

from __future__ import annotations

from typing import Any

from rlvr.trainers.config import ConfigError
from rlvr.trainers.samplers.protocol import SamplerBackend, SamplerSpec
from rlvr.trainers.samplers.registry import backend, load


def build_sampler(spec: SamplerSpec, version: int = 0, policy: Any = None) -> SamplerBackend:
    """A started backend holding policy `version`. `policy`: the trainer's live model, which a
    backend that can sample from it (hf) uses instead of loading its own copy (nothing to sync)."""
    try:
        entry = backend(spec.backend)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None
    try:
        return load(entry.builder)(spec, version, policy)
    except ImportError as exc:
        # The engine's own package missing (vllm, ...): say what to install, in one line.
        if entry.needs and _missing_package(exc):
            raise ConfigError(
                f"the {spec.backend} sampler needs {entry.needs} ({exc}); install it or use --sampler hf"
            ) from None
        raise


def _missing_package(exc: ImportError) -> bool:
    return isinstance(exc, ModuleNotFoundError)
