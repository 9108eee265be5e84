"""The sampler backends by name: the one place a new backend is registered.

Each entry names the backend's builder as "module:function" (imported on first use, so naming a
backend loads no engine) and says what the trainer may ask of it. This module imports nothing:
settings, flags and checks read the names from here without loading torch or an engine
(`TrainConfig.sampler`'s choices are `TRAINING_BACKENDS`, `rlvr eval --sampler`'s `SAMPLER_CHOICES`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    builder: str  # "module:function", a `trainers.samplers.protocol.Builder`
    trains: bool  # takes the trainer's weights (`update_weights`): `rlvr train` may sample with it
    overlaps: bool = False  # loads weights between engine steps, tagging each token's version: asynchronous RL
    needs: str = ""  # what to install when its module cannot be imported
    choice: bool = True  # offered by `--sampler` (openai-chat is chosen by `rlvr eval --api chat` instead)


BACKENDS: dict[str, Backend] = {
    "vllm": Backend("rlvr.trainers.samplers.vllm_sampler:build", trains=True, overlaps=True, needs="vLLM"),
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
