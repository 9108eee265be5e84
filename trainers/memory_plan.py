"""The memory of the run about to start: `trainers.memory_estimate`'s pure estimate fed with what
only the run's world knows (the model's config.json and tokenizer, the environment's prompt lengths,
the device's memory), and the CUDA default micro-batch token bound applied to a `TrainConfig`.
Loads no model. Kept apart from the estimate so that the arithmetic stays pure and tested on
worked numbers, and this module is the one that reads files and devices."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from rlvr.trainers.memory_estimate import (
    GIB,
    MemoryEstimateError,
    MemoryInputs,
    ModelShape,
    cuda_micro_batch_tokens,
    estimate,
    fits,
    inputs_for,
)
from rlvr.trainers.samplers.registry import backend, load


def episode_tokens(config: Any, tokenizer: Any, context: int) -> tuple[int, int]:
    """(prompt, completion) tokens of the longest episode: the longest opening prompt of the
    environment's first tasks, and the generation budget. A multi-turn episode's completion holds
    every model turn and the environment's replies between them: max_turns x (max_tokens + a
    reply), a reply counted as long as the opening prompt (environments' replies are short
    messages), the whole at most the `context` length."""
    from rlvr.envs import EnvKind, make
    from rlvr.envs.chat_template import template_ids
    from rlvr.trainers.samplers.sizing import PROBE_TASKS

    env = make(config.env, disable_env_checker=True, **config.env_args)
    try:
        prompt = max(
            len(template_ids(tokenizer, env.reset(seed=s)[0], add_generation_prompt=True)) for s in range(PROBE_TASKS)
        )
        if getattr(env.unwrapped, "kind", None) == EnvKind.SINGLE_STEP:
            return prompt, config.max_tokens
        turns = int(getattr(env.unwrapped, "max_turns", 1) or 1)
        return prompt, max(config.max_tokens, min(context - prompt, turns * (config.max_tokens + prompt)))
    finally:
        env.close()


def run_inputs(config: Any, algo: Any) -> tuple[MemoryInputs, int | None]:
    """The `MemoryInputs` of a checked `TrainConfig` (its model's config.json, the tokenizer's
    prompt lengths, the device's memory), and the device's free bytes (None on the CPU). Loads no
    model: config.json and the tokenizer only."""
    from rlvr.trainers.device import resolve_device
    from rlvr.trainers.models import load_tokenizer, resolve_model

    path = resolve_model(config.model)
    shape = ModelShape.read(path)
    teacher = ModelShape.read(resolve_model(config.teacher)) if config.teacher else None
    raw = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    context = min(int((raw.get("text_config") or raw).get("max_position_embeddings", 4096)), 4096)
    prompt, completion = episode_tokens(config, load_tokenizer(path), context)
    device = resolve_device(config.device)
    free = total = None
    kv = None  # the cache the sampler sizes itself, as its backend declares
    kv_cache = backend(config.sampler).memory.kv_cache
    if device.type == "cuda":
        import torch

        free, total = torch.cuda.mem_get_info(device)
    elif kv_cache:
        from types import SimpleNamespace

        hf = SimpleNamespace(
            num_attention_heads=shape.heads,
            head_dim=shape.head_dim,
            hidden_size=shape.hidden,
            num_key_value_heads=shape.kv_heads,
            num_hidden_layers=shape.layers,
        )
        kv = load(kv_cache)(hf, context, config.batch_size, config.dtype, seq_tokens=2 * prompt + config.max_tokens)
    inputs = inputs_for(
        config, algo, shape, prompt, teacher=teacher, device=device.type, device_bytes=total, sampler_kv_bytes=kv
    )
    return replace(inputs, completion_tokens=completion), free


def device_label(inputs: MemoryInputs, free: int | None) -> str:
    if free is None or inputs.device_bytes is None:
        return inputs.device
    return f"{inputs.device} ({free / GIB:.1f} GiB free of {inputs.device_bytes / GIB:.1f})"


def memory_safe(config: Any, algo: Any) -> Any:
    """The CUDA default: where the models train on CUDA, neither `micro_batch_size` nor
    `micro_batch_tokens` is set and the whole (mini)batch would not fit in one micro-batch (`fits`),
    the config with `micro_batch_tokens` chosen so that a step's activations fit the device's free
    memory (`cuda_micro_batch_tokens`), and a line saying so; otherwise `config` itself (the CPU's
    defaults and results do not change, nor a run that fits as it is)."""
    if config.micro_batch_size is not None or config.micro_batch_tokens is not None:
        return config
    from rlvr.trainers.device import resolve_device

    if resolve_device(config.device).type != "cuda":
        return config
    import dataclasses
    import sys

    try:
        inputs, free = run_inputs(config, algo)
    except MemoryEstimateError as exc:
        print(f"warning: no memory estimate ({exc}): micro-batches are not bounded by tokens", file=sys.stderr)
        return config
    if fits(inputs, free):  # the whole (mini)batch at once fits: the micro-batches stay as they are
        return config
    tokens = cuda_micro_batch_tokens(inputs, free)
    bounded = estimate(replace(inputs, micro_batch_tokens=tokens))
    print(
        f"micro-batches of at most {tokens} tokens (packed), chosen to fit {free / GIB:.1f} GiB free on "
        f"{config.device}: estimated peak {bounded.total / GIB:.1f} GiB (set micro_batch_tokens or "
        f"micro_batch_size to choose)",
        file=sys.stderr,
    )
    return dataclasses.replace(config, micro_batch_tokens=tokens)
