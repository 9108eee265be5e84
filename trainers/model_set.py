"""What a `Trainer` trains: the policy, the frozen reference (or teacher), the value head or critic
(`Models`), loaded from a `TrainConfig` (`build_models`); how they are saved, and what the sampler
loads from them (`Models.sampler_weights`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlvr.trainers import activation_checkpointing, precision
from rlvr.trainers import lora as adapters  # not `lora`: `Models.lora` says whether the policy has one
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.device import resolve_device
from rlvr.trainers.models import load_causal_lm, load_tokenizer, resolve_model
from rlvr.trainers.policy import Critic, ValueHead

CRITIC_DIR = "critic"


@dataclass
class Models:
    path: Path  # the base model directory: tokenizer, reference weights
    tokenizer: Any
    policy: nn.Module
    reference: nn.Module | None = None
    value_head: ValueHead | None = None
    critic: Critic | None = None
    # LoRA: the reference is the base model, i.e. the policy with its adapter off (no second copy)
    reference_is_base: bool = False

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    @property
    def wants_values(self) -> bool:
        return self.value_head is not None or self.critic is not None

    def policy_parameters(self) -> list[nn.Parameter]:
        """What the policy's optimizer group and gradient clipping cover (a value head shares the trunk)."""
        extra = list(self.value_head.parameters()) if self.value_head is not None else []
        return [p for p in self.policy.parameters() if p.requires_grad] + extra  # LoRA: the adapter's

    @property
    def lora(self) -> bool:
        return adapters.is_lora(self.policy)

    @contextlib.contextmanager
    def reference_model(self) -> Iterator[nn.Module | None]:
        """The model whose logprobs are the reference's, for the block: the reference (or teacher),
        the policy with its LoRA adapter off, or None without one."""
        if self.reference is None and self.reference_is_base:
            with adapters.adapter_off(self.policy) as base:
                yield base
        else:
            yield self.reference

    def sampler_weights(self) -> Iterable[tuple[str, torch.Tensor]]:
        """(name, tensor) pairs for the sampler's in-place load, under the base model's names: the
        policy's parameters, or with LoRA the adapted blocks' merged weights (`trainers.lora`)."""
        if self.lora:
            return adapters.merged_weights(self.policy)
        return ((name, p.detach()) for name, p in self.policy.named_parameters())

    def save(self, directory: Path) -> None:
        """A Hugging Face directory that `transformers` and vLLM load as it is; with LoRA the
        adapter alone (adapter_model.safetensors, adapter_config.json naming its base)."""
        if self.lora:
            adapters.save(self.policy, directory)
        else:
            self.policy.save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)
        if self.critic is not None:
            self.critic.model.save_pretrained(directory / CRITIC_DIR, safe_serialization=True)

    def extra_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        if self.critic is not None:
            state["critic_head"] = self.critic.head.state_dict()
        return state

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])
        if self.critic is not None:
            self.critic.head.load_state_dict(state["critic_head"])


def build_models(config: TrainConfig, needs_reference: bool, needs_values: bool, resume_from: Path | None) -> Models:
    """Policy from the checkpoint (or the base model), reference from the base model when KL is
    on (`needs_reference`) or from `config.teacher` when set (distillation), and a value head or
    critic when the algorithm needs values."""
    device = resolve_device(config.device)

    def load(name_or_path: Path | str) -> nn.Module:
        # on the training device, in the training dtype (bf16 weights on CPU with --dtype bfloat16)
        return _eval(load_causal_lm(name_or_path, dtype=precision.weight_dtype(config.dtype, device.type))).to(device)

    path = resolve_model(config.model)
    policy = load(path if config.lora_rank else resume_from or path)  # LoRA: the base
    if config.gradient_checkpointing:
        activation_checkpointing.enable(policy)
    if config.lora_rank:  # only the adapter trains (a resumed run's, from its checkpoint)
        policy = adapters.wrap(policy, path, config.lora_rank, config.lora_alpha, config.lora_targets, resume_from)
    models = Models(path=path, tokenizer=load_tokenizer(path), policy=policy)
    models.reference_is_base = bool(needs_reference and config.lora_rank and not config.teacher)
    # on-policy distillation: the teacher takes the reference model's slot
    if needs_reference and not models.reference_is_base:
        reference_path = resolve_model(config.teacher) if config.teacher else path
        models.reference = load(reference_path).requires_grad_(False)
    kind = config.value_model if config.value_model != "auto" else ("head" if needs_values else "none")
    if needs_values and kind == "head":
        models.value_head = ValueHead(policy.config.hidden_size).to(device)
    elif needs_values and kind == "critic":
        critic_path = resume_from / CRITIC_DIR if resume_from is not None else path
        models.critic = Critic(load(critic_path)).to(device)
    for model in (models.policy, models.reference, models.critic.model if models.critic else None):
        if model is not None:
            precision.prepare_model(model, config.dtype)  # autocast on CUDA
    return models


def _eval(model: nn.Module) -> nn.Module:
    return model.eval()  # dropout off, see trainers.loop
