"""Where the trainer's models run (`--device`): `auto` (CUDA when torch sees a GPU, else the CPU),
`cpu`, `cuda` or `cuda:N`.

The models (policy, reference or teacher, value head, critic) live on that device. A step's
`Batch` and its maths (advantages, losses, KL, rollout correction) stay on the CPU: they are
(batch, time) tensors, small next to a forward pass, and keeping them on one device means no
kernel has to care where the model is. `trainers.policy` moves each micro-batch to the model's
device for the forward and its per-token outputs back, differentiably, so the backward pass
reaches the weights wherever they are. On the CPU both moves are no-ops.
"""

from __future__ import annotations

import torch
from torch import nn

from rlvr.trainers.config import ConfigError
from rlvr.trainers.setting_choices import DEVICE, DEVICE_CHOICES


class DeviceError(ConfigError):
    """A `--device` that is malformed, or names a GPU this machine does not have."""


def resolve_device(spec: str) -> torch.device:
    """The device `spec` names; `auto` picks CUDA when available. Raises `DeviceError`."""
    if not isinstance(spec, str) or not DEVICE.fullmatch(spec.strip()):
        raise DeviceError(f"device must be {DEVICE_CHOICES}, got {spec!r}")
    spec = spec.strip()
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {spec}: torch sees no CUDA GPU here (torch.cuda.is_available() is False; "
                f"torch {torch.__version__})"
            )
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"device {spec}: only {torch.cuda.device_count()} CUDA GPU(s) here")
    return device


def model_device(model: nn.Module) -> torch.device:
    """The device of `model`'s parameters (the CPU for a model without any)."""
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def use_threads(threads: int | None) -> None:
    """torch's intra-op threads for this process (None: torch's default). Process-wide, so an entry
    point's to call (`rlvr train`, a script's main), never the library's."""
    if threads:
        torch.set_num_threads(threads)
