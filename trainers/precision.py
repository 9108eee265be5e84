"""Training precision (`--dtype`): float32, or bfloat16 done the way each device does it well.

- CUDA: float32 weights, forwards under `torch.autocast(bfloat16)` (`autocast_forward`): matmuls
  run in bf16 on the tensor cores, weights, gradients and AdamW stay float32.
- CPU: the weights themselves are bfloat16 (`weight_dtype`): half the memory of the weights,
  activations and gradients. AdamW directly on bf16 weights would lose most updates: a step of
  lr x ~1 = 1e-6 is far below half a bf16 ulp of a weight of 0.02 (about 6e-5), so it rounds away.
  `MasterWeightAdamW` therefore keeps float32 master copies (and float32 moments) and writes
  the rounded result back into the bf16 weights after each step: the optimizer costs as much
  memory as in float32 training, the model and its activations half.

Which path a run takes follows from where its models are (`--device`, `trainers.device`):
`prepare_model` wraps a model whose parameters are on CUDA in autocast.

A CPU without bfloat16 instructions (`cpu_has_bf16`: no avx512_bf16 or amx_bf16 on x86, no bf16 on
Arm) emulates every bf16 matmul, about 40x slower than float32 (572 s against about 60 s for a step
of the ~30M model on an AMD EPYC): `rlvr train --dtype bfloat16` then trains in float32 and says so.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch
from torch import nn

FLOAT32, BFLOAT16 = "float32", "bfloat16"
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 (AVX-512, AMX) and Arm


def bf16_in_cpuinfo(cpuinfo: str) -> bool:
    """Whether a /proc/cpuinfo text names bfloat16 instructions (its `flags` or `Features` lines)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features") and BF16_CPU_FLAGS & set(value.split()):
            return True
    return False


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively; True where it cannot be told (no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return bf16_in_cpuinfo(f.read())
    except OSError:
        return True


def weight_dtype(dtype: str, device_type: str = "cpu") -> torch.dtype:
    """The dtype to load weights in: bf16 only for `--dtype bfloat16` on CPU (CUDA autocasts fp32 weights)."""
    if dtype not in (FLOAT32, BFLOAT16):
        raise ValueError(f"dtype must be {FLOAT32} or {BFLOAT16}, got {dtype!r}")
    return torch.bfloat16 if dtype == BFLOAT16 and device_type == "cpu" else torch.float32


def autocast_forward(model: nn.Module, device_type: str, dtype: torch.dtype = torch.bfloat16) -> nn.Module:
    """Run every call of `model` under `torch.autocast(device_type, dtype)` (as accelerate does):
    the trainer's forwards, the reference's and `generate`'s alike, with no change at the call
    sites. The outputs are bf16 where autocast made them so; `trainers.policy` casts logits to
    float32 before the softmax."""
    inner = model.forward

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        with torch.autocast(device_type=device_type, dtype=dtype):
            return inner(*args, **kwargs)

    model.forward = forward
    return model


def prepare_model(model: nn.Module, dtype: str) -> nn.Module:
    """`model` (loaded in `weight_dtype(dtype)`) made ready for training in `dtype`: on CUDA with
    bfloat16, its forwards autocast."""
    device = next(model.parameters()).device
    if dtype == BFLOAT16 and device.type == "cuda":
        autocast_forward(model, "cuda")
    return model


class MasterWeightAdamW(torch.optim.AdamW):
    """AdamW whose parameters are float32 copies ("master weights") of low-precision model
    parameters. The model's backward fills the bf16 `.grad`s; `step` copies them into the masters'
    (float32), steps, and rounds the masters back into the model's weights. `zero_grad` clears
    both. Its `state_dict` is AdamW's, over the masters.

    A resumed run restarts its masters from the bf16 weights saved in the checkpoint (the float32
    low bits are lost once, at the resume)."""

    def __init__(self, params: Iterable, **kwargs):
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self._pairs: list[tuple[nn.Parameter, nn.Parameter]] = []
        master_groups = []
        for group in groups:
            masters = []
            for p in group["params"]:
                master = (
                    p if p.dtype == torch.float32 else nn.Parameter(p.detach().float(), requires_grad=p.requires_grad)
                )
                if master is not p:
                    self._pairs.append((p, master))
                masters.append(master)
            master_groups.append({**group, "params": masters})
        super().__init__(master_groups, **kwargs)

    @torch.no_grad()
    def step(self, closure=None):
        for model_p, master in self._pairs:
            master.grad = None if model_p.grad is None else model_p.grad.float()
        loss = super().step(closure)
        for model_p, master in self._pairs:
            model_p.copy_(master)  # round to nearest into the model's dtype
        return loss

    @torch.no_grad()
    def reload_masters(self) -> None:
        """The masters from the model's weights, after these were overwritten (a data-parallel rank
        given rank 0's weights)."""
        for model_p, master in self._pairs:
            master.copy_(model_p)

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)
        for model_p, _ in self._pairs:
            if set_to_none:
                model_p.grad = None
            elif model_p.grad is not None:
                model_p.grad.zero_()


def adamw(groups: list[dict], **kwargs) -> torch.optim.Optimizer:
    """AdamW, with float32 master weights when any parameter is of lower precision."""
    low = any(p.dtype != torch.float32 for g in groups for p in g["params"])
    return MasterWeightAdamW(groups, **kwargs) if low else torch.optim.AdamW(groups, **kwargs)
