"""Gradient (activation) checkpointing (`--gradient-checkpointing`): the policy's decoder layers
keep only their inputs in the forward and recompute the rest in the backward (less memory, about
a third more compute).

Transformers checkpoints a layer only while it is in training mode, and the trainer keeps its
models in `eval()` (dropout off: importance ratios compare the policy with itself). So a
forward pre-hook on the model sets the decoder layers' own `training` flag (not their
submodules': dropout stays off) to whether autograd is recording: differentiable forwards
checkpoint, no-grad ones (old and reference logprobs, `generate`) run as before with their KV
cache. A checkpointed forward drops the KV cache (the backward replay would write it twice), so
`trainers.policy.forward` does not share prompts through the cache then.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer


def enable(model: nn.Module) -> nn.Module:
    """Checkpoint `model`'s decoder layers (non-reentrant) in its differentiable forwards."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    # Only the reentrant variant needs inputs that require grad; the hook it adds would also mark
    # no-grad forwards' embeddings.
    model.disable_input_require_grads()
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no layers that transformers can checkpoint")

    def follow_autograd(module: nn.Module, args, kwargs):
        grad = torch.is_grad_enabled()
        for layer in layers:
            layer.training = grad  # the flag alone, not `.train()`: submodules (dropout) stay in eval
        if grad:  # no cache to build (the layers would drop it, with a warning)
            kwargs["use_cache"] = False
        return args, kwargs

    model.register_forward_pre_hook(follow_autograd, with_kwargs=True)
    return model
